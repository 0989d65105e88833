package scheduler

import (
	"github.com/ttkit/ttkit/internal/ttsysfs"
	"time"

	"github.com/ttkit/ttkit/queued/store"
)

// reporter reads the whole scheduler at one moment for GET /status.
type reporter struct{ *core }

// Status is the whole scheduler at one moment, for GET /status.
type Status struct {
	// VisibleBDF is Options.VisibleBDF (TT_DEVICE_VISIBLE=bdf).
	VisibleBDF  bool
	Cards       []CardStatus
	Queued      int // over all cards
	MaxQueued   int
	Stopping    bool
	Persistence PersistenceStatus
	Retention   RetentionStatus
	Output      OutputStatus
	// Warnings are problems met at start, such as leftover processes that
	// would not die.
	Warnings []string
}

// CardStatus is one card's state, current job and queue.
type CardStatus struct {
	ID    int
	State CardState
	// Worker is "running", "idle", "dispatching", "stopped", or
	// "paused: <why>" when it would dispatch but may not.
	Worker  string
	Current *JobInfo
	Queue   []JobInfo
	// EstimatedWait is the expected wait of a job submitted now.
	EstimatedWait time.Duration

	// Reset is the pending (queued or running) reset; LastReset the last
	// finished one. Each is nil when there is none.
	Reset, LastReset *ResetInfo
	// Reason says why the card is not healthy: why it is unfit (such as
	// "heartbeat stalled since 10:42:03") or dead; "" when healthy.
	// UnfitSince is since when the gate holds its jobs (zero when fit).
	Reason     string
	UnfitSince time.Time
	// DeadReason and DeadSince are set while the card is dead, also while
	// a reset tries to revive it.
	DeadReason string
	DeadSince  time.Time
	// Rung is the rung of the recovery ladder running on the card, such
	// as "deep reset (2/3)"; "" when none runs.
	Rung string
	// Recovery says why the card's recovery does not go on: it waits for
	// a process of someone else holding the card ("recovery waiting: card
	// 1 held by pid 4242 (alice: python3 train.py)"), or the automatic
	// ladders are paused by their bound per hour; "" otherwise.
	Recovery string
	// Foreign lists the processes holding the card that are not its
	// running job (see Holder); ForeignError says why the list may be
	// incomplete.
	Foreign      []Holder
	ForeignError string
	// ForeignWait is Options.WaitForeign.
	ForeignWait bool
	// Paused is why the card does not start its next job ("" when it is
	// not paused), as Worker shows it after "paused: ".
	Paused string
	// ResetEpoch counts the card's completed resets (store.Card.ResetEpoch).
	ResetEpoch uint64
	// Identity is the card's PCI address and board, from sysfs (empty
	// where sysfs has no class directory for it); IdentityError says why
	// it could not be read.
	Identity      ttsysfs.Identity
	IdentityError string
	// CrossCard lists the running jobs of other cards seen holding this
	// one (tt-metal opens every card it sees).
	CrossCard []CrossCard
	// WaitingSince is when the card began to stand idle for a job of
	// several cards at the head of its queue that waits for the others
	// (Worker says which); zero when it does not. Strict FIFO costs this
	// idle time, and status shows it.
	WaitingSince time.Time
}

// ResetInfo is a card's pending or last reset.
type ResetInfo struct {
	JobID string
	State store.State
	// Result is ResultOK or ResultFailed once done.
	Result string
	Detail string
	// At is when the reset was requested (queued), started (running) or
	// finished (done).
	At time.Time
}

// PersistenceStatus says whether writes succeed.
type PersistenceStatus struct {
	OK    bool
	Error string
	Since time.Time
	// Held counts finished jobs whose records wait in memory.
	Held     int
	Attempts int
}

// RetentionStatus describes the last retention run.
type RetentionStatus struct {
	LastRun time.Time
	Deleted int
	Warning string
}

// status returns a snapshot. The holders of each card come from a scan
// at most HolderMaxAge old.
func (s reporter) status() Status {
	s.identify()
	scan := s.holders.get(s.opt.HolderMaxAge)
	st, own, running := s.statusLocked()
	for i := range st.Cards {
		cs := &st.Cards[i]
		cs.Foreign, cs.ForeignError = s.holders.foreignOf(scan, cs.ID, own[i], running)
	}
	return st
}

// statusLocked takes the snapshot under the lock, with each card's running
// job's id and every running job, for telling its holders apart afterwards.
func (s reporter) statusLocked() (Status, []string, []ownJob) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opt.Now()
	var own []string
	st := Status{
		Queued: s.queued, MaxQueued: s.opt.MaxQueued, Stopping: s.stopping, VisibleBDF: s.opt.VisibleBDF,
		Persistence: PersistenceStatus{OK: s.persist.err == nil, Held: len(s.persist.held), Attempts: s.persist.attempts},
		Retention:   RetentionStatus{LastRun: s.retain.lastRun, Deleted: s.retain.deleted, Warning: s.retain.warning},
		Output:      s.budget.statusLocked(),
		Warnings:    append([]string(nil), s.warnings...),
	}
	if s.persist.err != nil {
		st.Persistence.Error = s.persist.err.Error()
		st.Persistence.Since = s.persist.since
	}
	for _, id := range s.order {
		c := s.cards[id]
		cs := CardStatus{ID: id, State: c.shownState(), Reason: c.unfit, UnfitSince: c.unfitSince, Rung: c.rung, Recovery: c.recoveryNote(), Worker: s.workerStateLocked(c), ForeignWait: s.opt.WaitForeign, Paused: c.paused,
			ResetEpoch: c.resetEpoch, Identity: c.ident, IdentityError: c.identErr, CrossCard: s.crossCardsLocked(id)}
		if c.waiting != "" {
			cs.WaitingSince = c.waitSince
		}
		var o string
		if c.current != nil {
			info := JobInfo{Job: c.current.rec, EstimatedWait: c.remaining(c.current, now), EstimatedRun: c.runEstimate(c.current),
				EstimateKnown: c.estimateKnown(c.current), Overdue: c.overdue(c.current, now)}
			cs.Current = &info
			o = c.current.rec.ID
		}
		own = append(own, o)
		if j := c.reset; j != nil {
			at := j.rec.SubmittedAt
			if j.rec.State == store.StateRunning {
				at = j.rec.StartedAt
			}
			cs.Reset = &ResetInfo{JobID: j.rec.ID, State: j.rec.State, At: at}
		}
		if c.last.id != "" {
			cs.LastReset = &ResetInfo{JobID: c.last.id, State: store.StateDone, Result: c.last.result, Detail: c.last.detail, At: c.last.at}
		}
		if c.dead != nil {
			cs.DeadReason, cs.DeadSince = c.dead.reason, c.dead.since
			cs.Reason = c.dead.reason
		}
		cs.Queue = make([]JobInfo, len(c.queue))
		wait := c.currentRemaining(now)
		for i, j := range c.queue {
			run := c.runEstimate(j)
			cs.Queue[i] = JobInfo{Job: j.rec, Position: i + 1, EstimatedWait: wait, EstimatedRun: run, EstimateKnown: c.estimateKnown(j), WaitsFor: j.waitsFor()}
			wait += run
		}
		cs.EstimatedWait = wait
		st.Cards = append(st.Cards, cs)
	}
	return st, own, runningOf(s.core)
}

func (s reporter) workerStateLocked(c *card) string {
	switch {
	case c.current != nil:
		return "running"
	case s.stopping:
		return "stopped"
	case s.persist.err != nil:
		return "paused: persistence failing"
	case len(c.queue) > 0 && c.queue[0].rec.Kind == store.KindReset:
		return "dispatching"
	case c.dead != nil:
		return "paused: card dead"
	case c.unfit != "" && c.head() != nil && gatedJob(c.head()):
		return "paused: card unfit: " + c.unfit
	case c.paused != "":
		return "paused: " + c.paused
	case c.waiting != "":
		return "waiting: " + c.waiting
	case len(c.queue) > 0 && c.head() == nil:
		return "waiting: every queued job waits for a job it was queued after"
	case len(c.queue) > 0:
		return "dispatching"
	}
	return "idle"
}
