package scheduler

import (
	"container/list"
	"crypto/sha256"
	"slices"
	"time"

	"github.com/ttkit/ttkit/queued/store"
)

// Estimates are learned from history, per card:
//
//   - One iteration of a job is expected to take the median per-iteration
//     run time of the last HistorySize finished runs of the same command
//     (the exact cmd string) on the same card; else the median of the
//     card's last HistorySize finished jobs, whatever their command; else
//     DefaultRunEstimate. A finished run is a job that ended by itself:
//     outcome success, failure or timeout; a killed or interrupted job was
//     cut short from outside and teaches nothing. Its per-iteration time
//     is (finished - started) / iterations started. The median of an even
//     count is the mean of the two middle values.
//   - A job is expected to run iteration × repeat (EstimatedRun).
//   - A running job is expected to end after what is left of its current
//     iteration (the iteration estimate minus the time since that
//     iteration started, never negative) plus iteration × the iterations
//     not started yet. A running reset: its estimate minus its elapsed
//     time, never negative.
//   - A queued job's wait is the running job's remainder plus the
//     EstimatedRun of every entry ahead of it.
//
// A reset is estimated like a job whose command is "reset card N": from
// the card's own past resets, else the card's jobs, else the default. Its
// duration is not counted among the card's jobs.
//
// An active hold with an expiry runs until it expires (it may be released
// sooner, as a job may end sooner) and is never overdue; any other hold is
// estimated like a job.
//
// Memory is bounded: HistorySize durations per card and per command, and
// at most MaxCommands commands per card (the least recently finished one
// is forgotten first; its queued jobs fall back to the card's median). At
// start the history is seeded from the newest SeedRecords finished
// records in the store, so estimates survive a restart.
//
// Submit needs the wait of the job it just queued, which is the whole
// queue's estimate; the card keeps that sum up to date as jobs enter and
// leave the queue and as medians move, so a submission costs the same at
// any queue depth.

// DefaultRunEstimate is the expected iteration time with no history at
// all on the card (the seed leaves it open; a minute is a cautious guess
// for a device test).
const DefaultRunEstimate = 60 * time.Second

// HistorySize is how many recent runs each median is taken over.
const HistorySize = 20

// MaxCommands bounds the commands whose history each card keeps.
const MaxCommands = 256

// SeedRecords is how many of the newest finished records seed the history
// at start.
const SeedRecords = 1000

// cmdKey identifies a command in the history without keeping the command,
// which can be large.
type cmdKey [sha256.Size]byte

func keyOf(cmd string) cmdKey { return sha256.Sum256([]byte(cmd)) }

// keyOfRec is the key of a record's command, whole or brief (a brief
// record carries its whole command's digest).
func keyOfRec(rec *store.Job) cmdKey { return rec.CmdDigest() }

// recent is a ring of the last HistorySize durations and their median.
type recent struct {
	vals   [HistorySize]time.Duration
	n      int
	next   int
	median time.Duration
}

func (r *recent) add(d time.Duration) {
	r.vals[r.next] = d
	r.next = (r.next + 1) % HistorySize
	r.n = min(r.n+1, HistorySize)
	var buf [HistorySize]time.Duration
	s := buf[:r.n]
	copy(s, r.vals[:r.n])
	slices.Sort(s)
	if r.n%2 == 1 {
		r.median = s[r.n/2]
	} else {
		r.median = (s[r.n/2-1] + s[r.n/2]) / 2
	}
}

// cmdHistory is one command's recent runs on a card.
type cmdHistory struct {
	key  cmdKey
	runs recent
	elem *list.Element // in estimator.lru
}

// estimator is one card's history and the running sum of its queue's
// estimates, guarded by core.mu.
type estimator struct {
	card   recent                 // the card's jobs, any command
	cmds   map[cmdKey]*cmdHistory // at most MaxCommands
	lru    list.List              // of *cmdHistory, most recently finished first
	queued map[cmdKey]int         // iterations queued per command (Σ repeat)
	// keyed is Σ queued[k] × cmds[k].runs.median over the commands with
	// history; fallback is Σ queued[k] over those without, which take the
	// card's median.
	keyed    time.Duration
	fallback int
}

func newEstimator() *estimator {
	return &estimator{cmds: map[cmdKey]*cmdHistory{}, queued: map[cmdKey]int{}}
}

// cardIteration is the card's median, or the default without history.
func (e *estimator) cardIteration() time.Duration {
	if e.card.n == 0 {
		return DefaultRunEstimate
	}
	return e.card.median
}

// iteration is the expected time of one iteration of command k.
func (e *estimator) iteration(k cmdKey) time.Duration {
	if h := e.cmds[k]; h != nil {
		return h.runs.median
	}
	return e.cardIteration()
}

// enqueue counts n queued iterations of command k in the queue's sum.
func (e *estimator) enqueue(k cmdKey, n int) {
	e.queued[k] += n
	if h := e.cmds[k]; h != nil {
		e.keyed += time.Duration(n) * h.runs.median
	} else {
		e.fallback += n
	}
}

// dequeue reverses enqueue.
func (e *estimator) dequeue(k cmdKey, n int) {
	if left := e.queued[k] - n; left > 0 {
		e.queued[k] = left
	} else {
		delete(e.queued, k)
	}
	if h := e.cmds[k]; h != nil {
		e.keyed -= time.Duration(n) * h.runs.median
	} else {
		e.fallback -= n
	}
}

// queuedRun is the expected run time of everything queued.
func (e *estimator) queuedRun() time.Duration {
	return e.keyed + time.Duration(e.fallback)*e.cardIteration()
}

// observe records a finished run of command k taking perIteration per
// iteration; job says whether it counts among the card's jobs too (a
// reset does not).
func (e *estimator) observe(k cmdKey, perIteration time.Duration, job bool) {
	if perIteration < 0 {
		return
	}
	if job {
		e.card.add(perIteration)
	}
	q := time.Duration(e.queued[k])
	h := e.cmds[k]
	if h == nil {
		if len(e.cmds) >= MaxCommands {
			e.forget(e.lru.Back().Value.(*cmdHistory))
		}
		h = &cmdHistory{key: k}
		h.elem = e.lru.PushFront(h)
		e.cmds[k] = h
		h.runs.add(perIteration)
		e.fallback -= int(q)
		e.keyed += q * h.runs.median
		return
	}
	e.lru.MoveToFront(h.elem)
	old := h.runs.median
	h.runs.add(perIteration)
	e.keyed += q * (h.runs.median - old)
}

// forget drops a command's history; its queued iterations fall back to
// the card's median.
func (e *estimator) forget(h *cmdHistory) {
	q := e.queued[h.key]
	e.keyed -= time.Duration(q) * h.runs.median
	e.fallback += q
	e.lru.Remove(h.elem)
	delete(e.cmds, h.key)
}

// learnable reports whether a done record's run teaches the estimates,
// and its time per iteration.
func learnable(rec *store.Job) (time.Duration, bool) {
	if rec.Iterations < 1 || rec.StartedAt.IsZero() || rec.FinishedAt.Before(rec.StartedAt) {
		return 0, false
	}
	run := rec.FinishedAt.Sub(rec.StartedAt)
	if rec.Kind == store.KindReset {
		// A reset's "iterations" are its control commands; it is timed whole.
		return run, rec.Outcome == store.OutcomeSuccess || rec.Outcome == store.OutcomeFailure
	}
	switch rec.Outcome {
	case store.OutcomeSuccess, store.OutcomeFailure, store.OutcomeTimeout:
		return run / time.Duration(rec.Iterations), true
	}
	return 0, false
}

// learn records a done run of command k, if it teaches anything.
func (c *card) learn(k cmdKey, rec *store.Job) {
	if d, ok := learnable(rec); ok {
		c.est.observe(k, d, rec.Kind != store.KindReset)
	}
}

// known reports whether command k has runs of its own on the card.
func (e *estimator) known(k cmdKey) bool { return e.cmds[k] != nil }

// estimateKnown reports whether j's run estimate is more than a guess:
// its command has runs of its own on the card, or it is an active hold
// that expires.
func (c *card) estimateKnown(j *job) bool {
	if _, ok := holdEnds(j); ok && !j.rec.StartedAt.IsZero() {
		return true
	}
	return c.est.known(j.key)
}

// overdue is how far a running job's current iteration is past its
// iteration estimate, 0 when it is not; a running reset is timed whole. A
// hold is never overdue: it lasts until it is released or expires.
func (c *card) overdue(j *job, now time.Time) time.Duration {
	if j.rec.Kind == store.KindHold {
		return 0
	}
	iter := c.est.iteration(j.key)
	since := j.iterStart
	if j.rec.Kind == store.KindReset {
		since = j.rec.StartedAt
	}
	return max(now.Sub(since)-iter, 0)
}

// runEstimate is the expected run time of a whole job. An active hold
// with an expiry runs from its start to its expiry.
func (c *card) runEstimate(j *job) time.Duration {
	if until, ok := holdEnds(j); ok && !j.rec.StartedAt.IsZero() {
		return max(until.Sub(j.rec.StartedAt), 0)
	}
	return c.est.iteration(j.key) * time.Duration(j.repeats())
}

// remaining is the expected time until a running job ends; for an
// active hold with an expiry, the time until it expires.
func (c *card) remaining(j *job, now time.Time) time.Duration {
	if until, ok := holdEnds(j); ok {
		return max(until.Sub(now), 0)
	}
	iter := c.est.iteration(j.key)
	if j.rec.Kind == store.KindReset {
		return max(iter-now.Sub(j.rec.StartedAt), 0)
	}
	started := max(j.rec.Iterations, 1) // the first is under way from dispatch on
	left := max(j.rec.Repeat-started, 0)
	return max(iter-now.Sub(j.iterStart), 0) + iter*time.Duration(left)
}

// holdEnds is when hold j expires; false for a job, a reset or a hold
// that never expires (its length is guessed like a job's).
func holdEnds(j *job) (time.Time, bool) {
	return j.rec.ExpiresAt, j.rec.Kind == store.KindHold && !j.rec.ExpiresAt.IsZero()
}

// currentRemaining is the running job's remainder, 0 when none runs.
func (c *card) currentRemaining(now time.Time) time.Duration {
	if c.current == nil {
		return 0
	}
	return c.remaining(c.current, now)
}

// tailWait is the expected wait of a job submitted now, behind the whole
// queue, without walking it.
func (c *card) tailWait(now time.Time) time.Duration {
	return c.currentRemaining(now) + c.est.queuedRun()
}

// seed feeds the history with finished records, newest first (as
// store.Recent returns them), so the ring ends on the newest. They are
// brief records: what a run teaches is its card, times, outcome and the
// digest of its command, never the command itself, so seeding costs the
// same whatever the commands' size.
func (s restart) seed(recs []store.Job) {
	for i := len(recs) - 1; i >= 0; i-- {
		rec := &recs[i]
		if c := s.cards[rec.Card()]; c != nil {
			c.learn(keyOfRec(rec), rec)
		}
	}
}
