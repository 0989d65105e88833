package scheduler

import (
	"slices"
	"time"

	"github.com/ttkit/ttkit/internal/ttsysfs"
	"github.com/ttkit/ttkit/queued/store"
)

// CardState is a card's health: Recovering while a reset job runs on it,
// Dead after failed recovery (until a reset revives it or the host
// reboots), Unfit while the gate holds its jobs (see fitness.go), Healthy
// otherwise.
type CardState string

// Card states.
const (
	Healthy    CardState = "healthy"
	Unfit      CardState = "unfit"
	Recovering CardState = "recovering"
	Dead       CardState = "dead"
	// Resetting is Recovering's old name, kept so code written against it
	// builds; the state reads "recovering" since the fitness gate.
	Resetting = Recovering
)

// card is one card's queue and worker state, guarded by core.mu.
type card struct {
	id         int
	state      CardState
	queue      []*job // queued jobs, next first; a reset is put at the head
	est        *estimator
	current    *job   // taken for dispatch or running
	resetEpoch uint64 // completed resets; see store.Card.ResetEpoch
	reset      *job   // the pending (queued or running) reset, nil when none
	dead       *deadInfo
	last       resetResult      // the last finished reset
	paused     string           // why a dispatchable job waits (a foreign holder); "" when it does not
	waiting    string           // why the head, a job of several cards, waits for the others; "" when it does not
	waitSince  time.Time        // since when the card has been waiting so; read only while waiting is set
	ident      ttsysfs.Identity // PCI address and board, from sysfs; see identify
	identErr   string           // why ident could not be read, if it could not
	unfit      string           // why the gate holds the card's jobs; "" when it is fit (see fitness.go)
	unfitSince time.Time        // since when it is unfit; read only while unfit is set
	rung       string           // the rung of the recovery ladder running, "" when none (see ladder.go)
	heldBy     string           // why the running recovery waits for someone else's process (see foreignwait.go)
	autoPaused string           // why queued asks for no more automatic recovery of the unfit card this hour
	rev        uint64           // changes to the card record in memory
	savedRev   uint64           // the revision last made durable
	wake       chan struct{}    // capacity 1: something changed, look again
	// settled, when not nil, closes once what the card's last job left
	// is swept and its leader reaped (runner.Result.Settled): nothing
	// else runs on the card before.
	settled <-chan struct{}
	// unmet says a queued job of the card may have a dependency that can
	// no longer be met, for the worker to end (after.go); false spares the
	// worker a walk of the queue.
	unmet bool
}

func newCard(id int) *card {
	return &card{id: id, state: Healthy, wake: make(chan struct{}, 1), est: newEstimator()}
}

// push appends a job to the tail of the queue.
func (c *card) push(j *job) {
	c.queue = append(c.queue, j)
	c.est.enqueue(j.key, j.repeats())
}

// pushFront puts a job at the head of the queue: a reset.
func (c *card) pushFront(j *job) {
	c.queue = append([]*job{j}, c.queue...)
	c.est.enqueue(j.key, j.repeats())
}

// putBack returns a job that was taken but never started to the head of
// the queue, behind a pending reset: the reset that stopped it, or one
// that arrived meanwhile, runs first.
func (c *card) putBack(j *job) {
	i := 0
	if len(c.queue) > 0 && c.queue[0].rec.Kind == store.KindReset && j.rec.Kind != store.KindReset {
		i = 1
	}
	c.queue = slices.Insert(c.queue, i, j)
	c.est.enqueue(j.key, j.repeats())
}

// reinsert returns a queued job to its FIFO place (by sequence number,
// behind a pending reset), after a kill that could not be recorded.
func (c *card) reinsert(j *job) {
	i := 0
	for i < len(c.queue) && (c.queue[i].rec.Kind == store.KindReset || c.queue[i].rec.Seq < j.rec.Seq) {
		i++
	}
	c.queue = slices.Insert(c.queue, i, j)
	c.est.enqueue(j.key, j.repeats())
}

// pop removes the head of the queue.
func (c *card) pop() *job {
	j := c.queue[0]
	c.queue[0] = nil
	c.queue = c.queue[1:]
	c.est.dequeue(j.key, j.repeats())
	return j
}

// take removes j, the card's head (see head), from its queue: the first
// job unless jobs ahead of it wait for a dependency.
func (c *card) take(j *job) {
	if len(c.queue) > 0 && c.queue[0] == j {
		c.pop()
		return
	}
	c.remove(j)
}

// remove takes a job out of the queue wherever it is; false if absent.
func (c *card) remove(j *job) bool {
	for i, q := range c.queue {
		if q == j {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			c.est.dequeue(j.key, j.repeats())
			return true
		}
	}
	return false
}

func (c *card) wakeup() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// shownState is the state status and the metrics show: the card's own,
// Unfit for a card not otherwise recovering or dead that the gate holds.
func (c *card) shownState() CardState {
	if c.state == Healthy && c.unfit != "" {
		return Unfit
	}
	return c.state
}

// recoveryNote is why the card's recovery does not go on, for status:
// its reset waits for someone else's process, or, while the card is
// unfit, its automatic ladders are paused by their bound per hour.
func (c *card) recoveryNote() string {
	switch {
	case c.heldBy != "":
		return c.heldBy
	case c.unfit != "" && c.reset == nil && c.dead == nil:
		return c.autoPaused
	}
	return ""
}

// idleState is the card's state when no reset runs on it.
func (c *card) idleState() CardState {
	if c.dead != nil {
		return Dead
	}
	return Healthy
}
