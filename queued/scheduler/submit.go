package scheduler

import (
	"fmt"
	"time"

	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
)

// submitter takes jobs into the queues and out of them again: submission
// and kill.
type submitter struct{ *core }

// JobSpec is a validated submission. The API checks every field against
// the limits; the scheduler checks only what depends on its state.
type JobSpec struct {
	Card     int
	Cmd      string
	Cwd      string
	Env      map[string]string
	Timeout  time.Duration // 0 selects the default
	Repeat   int           // less than 1 means 1
	ClientID string
	// OwnerUID is the submitter's uid, from the kernel; nil when unknown.
	// In system mode (Options.RunAs) the job runs as this user.
	OwnerUID *uint32
	// Owner is the submitter's user name, for display.
	Owner string

	// EnvFromShell names the Env entries taken from the submitter's shell.
	EnvFromShell []string
}

// submit durably queues a job at the tail of its card's queue and returns
// it with its position and estimated wait. It fails with ErrUnknownCard,
// ErrStopping, ErrPersistence (also when this very insert fails),
// ErrCardDead or ErrQueueFull.
func (s submitter) submit(spec JobSpec) (JobInfo, error) {
	key := keyOf(spec.Cmd)
	s.mu.Lock()
	c := s.cards[spec.Card]
	switch {
	case c == nil:
		s.mu.Unlock()
		return JobInfo{}, fmt.Errorf("card %d: %w", spec.Card, ErrUnknownCard)
	case s.stopping:
		s.mu.Unlock()
		return JobInfo{}, ErrStopping
	case s.persist.err != nil:
		err := s.persist.err
		s.mu.Unlock()
		return JobInfo{}, fmt.Errorf("%w: %w", ErrPersistence, err)
	case c.dead != nil:
		err := c.deadErrLocked()
		s.mu.Unlock()
		return JobInfo{}, err
	case s.queued >= s.opt.MaxQueued:
		s.mu.Unlock()
		return JobInfo{}, fmt.Errorf("%d jobs queued: %w", s.queued, ErrQueueFull)
	}
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = s.opt.DefaultTimeout
	}
	card := spec.Card
	j := newKeyedJob(store.Job{
		ID: store.NewID(), Seq: s.nextSeq, Kind: store.KindJob, Device: &card,
		Cmd: spec.Cmd, Cwd: spec.Cwd, Env: spec.Env, EnvFromShell: spec.EnvFromShell,
		Timeout: int64((timeout + time.Second - 1) / time.Second), Repeat: max(spec.Repeat, 1),
		ClientID: spec.ClientID, OwnerUID: spec.OwnerUID, Owner: spec.Owner, State: store.StateQueued, SubmittedAt: s.opt.Now(),
	}, key, false)
	s.nextSeq++
	c.push(j)
	s.jobs[j.rec.ID] = j
	s.queued++
	rec := j.rec
	s.mu.Unlock()

	err := s.st.Put(rec)

	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		c.remove(j)
		delete(s.jobs, j.rec.ID)
		s.queued--
		s.persist.failLocked(err)
		c.wakeup()
		return JobInfo{}, fmt.Errorf("%w: %w", ErrPersistence, err)
	}
	j.durable = true
	s.changes.bump()
	c.wakeup()
	if c.dead != nil && c.remove(j) {
		// The card died while this insert committed, after its queue was
		// failed: fail this job the same way.
		return JobInfo{}, s.failDeadLocked(c, j)
	}
	return s.fromTailLocked(c, j), nil
}

// fromTailLocked is a just-submitted job's info, found by walking back
// from the tail: only the jobs submitted while its insert committed can
// be behind it, so the cost does not grow with the queue's depth.
func (s submitter) fromTailLocked(c *card, j *job) JobInfo {
	if j.rec.State != store.StateQueued {
		return s.infoLocked(j)
	}
	var behind time.Duration
	for i := len(c.queue) - 1; i >= 0; i-- {
		q := c.queue[i]
		if q != j {
			behind += c.runEstimate(q)
			continue
		}
		run := c.runEstimate(j)
		return JobInfo{Job: j.rec, Position: i + 1, EstimatedRun: run, EstimateKnown: c.est.known(j.key),
			EstimatedWait: c.tailWait(s.opt.Now()) - behind - run}
	}
	return s.infoLocked(j)
}

// kill stops a job: a queued one (a queued reset too) is removed from its
// queue and recorded as killed (exit -1) before the answer; a running one
// gets SIGINT, then SIGKILL after the grace period, and is recorded when it
// ends. Exactly one of several concurrent kills of a queued job takes
// effect; the others wait for its record and get ErrFinished, as for any
// finished job. While writes fail, a queued job cannot be killed
// (ErrPersistence): it stays queued, and nothing starts meanwhile anyway.
// ErrResetRunning for a running reset.
func (s submitter) kill(id string) (JobInfo, error) {
	s.mu.Lock()
	j := s.jobs[id]
	if j == nil || !j.durable {
		s.mu.Unlock()
		info, err := (jobIndex{s.core}).job(id)
		if err != nil {
			return JobInfo{}, err
		}
		return info, fmt.Errorf("job %s: %w", id, ErrFinished)
	}
	for j.ending && j.rec.State != store.StateDone {
		// Another kill (or a dead card) is recording its end: answer with
		// that record.
		ch := j.changed
		s.mu.Unlock()
		<-ch
		s.mu.Lock()
	}
	switch {
	case j.rec.State == store.StateDone:
		info := s.infoLocked(j)
		s.mu.Unlock()
		return info, fmt.Errorf("job %s: %w", id, ErrFinished)
	case j.rec.State == store.StateRunning && j.rec.Kind == store.KindReset:
		info := s.infoLocked(j)
		s.mu.Unlock()
		return info, fmt.Errorf("reset %s of card %d: %w", id, j.rec.Card(), ErrResetRunning)
	case j.rec.State == store.StateRunning:
		j.stopFor(stopKill)
		info := s.infoLocked(j)
		s.mu.Unlock()
		return info, nil
	case s.persist.err != nil:
		err := s.persist.err
		s.mu.Unlock()
		return JobInfo{}, fmt.Errorf("job %s stays queued: %w: %w", id, ErrPersistence, err)
	}
	c := s.cards[j.rec.Card()]
	c.remove(j)
	if c.reset == j {
		c.reset = nil // a reset request now schedules a new one
	}
	s.queued--
	j.ending = true
	rec := finishRecord(j.rec, runner.Result{Stopped: true}, stopKill, runner.LogState{}, s.opt.Now())
	s.mu.Unlock()
	err := s.st.Put(rec)
	s.mu.Lock()
	defer s.mu.Unlock()
	j.ending = false
	if err != nil {
		// Not recorded, so not killed: back to its place in the queue.
		s.persist.failLocked(err)
		c.reinsert(j)
		if j.rec.Kind == store.KindReset && c.reset == nil {
			c.reset = j
		}
		s.queued++
		s.notify(j)
		return JobInfo{}, fmt.Errorf("job %s stays queued: %w: %w", id, ErrPersistence, err)
	}
	j.stopFor(stopKill)
	s.met.jobEnded(&rec)
	s.settleLocked(j, rec)
	c.wakeup()
	return s.infoLocked(j), nil
}

// failDeadLocked records a queued job of a dead card as failed (exit -1,
// "card N is dead") and returns the refusal for its submitter. The record
// is written while the lock is released.
func (s submitter) failDeadLocked(c *card, j *job) error {
	s.queued--
	j.ending = true
	refusal := c.deadErrLocked()
	rec := deadRecord(j.rec, c.id, s.opt.Now())
	s.met.jobEnded(&rec)
	s.mu.Unlock()
	err := s.st.Put(rec)
	s.mu.Lock()
	if err != nil {
		s.persist.failLocked(err)
		s.persist.holdLocked(j, rec)
	} else {
		s.settleLocked(j, rec)
	}
	return refusal
}
