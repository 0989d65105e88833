package scheduler

import (
	"time"
)

// Status is the whole scheduler at one moment, for GET /status.
type Status struct {
	Cards       []CardStatus
	Queued      int // over all cards
	MaxQueued   int
	Stopping    bool
	Persistence PersistenceStatus
	Retention   RetentionStatus
	// Warnings are problems met at start, such as leftover processes that
	// would not die.
	Warnings []string
}

// CardStatus is one card's state, current job and queue.
type CardStatus struct {
	ID    int
	State CardState
	// Worker is "running", "idle", or "paused: <why>" when it would
	// dispatch but may not.
	Worker  string
	Current *JobInfo
	Queue   []JobInfo
	// EstimatedWait is the expected wait of a job submitted now.
	EstimatedWait time.Duration
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

// Status returns a snapshot.
func (s *Scheduler) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opt.Now()
	st := Status{
		Queued: s.queued, MaxQueued: s.opt.MaxQueued, Stopping: s.stopping,
		Persistence: PersistenceStatus{OK: s.persist.err == nil, Held: len(s.persist.held), Attempts: s.persist.attempts},
		Retention:   RetentionStatus{LastRun: s.retain.lastRun, Deleted: s.retain.deleted, Warning: s.retain.warning},
		Warnings:    append([]string(nil), s.warnings...),
	}
	if s.persist.err != nil {
		st.Persistence.Error = s.persist.err.Error()
		st.Persistence.Since = s.persist.since
	}
	for _, id := range s.order {
		c := s.cards[id]
		cs := CardStatus{ID: id, State: c.state, Worker: s.workerStateLocked(c)}
		waits := c.waits(now)
		if c.current != nil {
			info := JobInfo{Job: c.current.rec, EstimatedWait: c.remaining(&c.current.rec, now)}
			cs.Current = &info
		}
		cs.Queue = make([]JobInfo, len(c.queue))
		for i, j := range c.queue {
			cs.Queue[i] = JobInfo{Job: j.rec, Position: i + 1, EstimatedWait: waits[i]}
		}
		cs.EstimatedWait = waits[len(c.queue)]
		st.Cards = append(st.Cards, cs)
	}
	return st
}

func (s *Scheduler) workerStateLocked(c *card) string {
	switch {
	case c.current != nil:
		return "running"
	case s.stopping:
		return "stopped"
	case s.persist.err != nil:
		return "paused: persistence failing"
	case c.state != Healthy:
		return "paused: card " + string(c.state)
	case len(c.queue) > 0:
		return "dispatching"
	}
	return "idle"
}
