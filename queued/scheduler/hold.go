package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ttkit/ttkit/queued/store"
)

// Holds. A hold takes its cards in their FIFO turn, as a job of those
// cards would, and keeps them, running nothing, until it is released, it
// expires, or the Slurm job it was taken for is gone. Jobs queued behind
// it wait; a reset of a held card waits for the release unless forced
// (see ResetRequest.Force). A hold is durable like a job, and one that
// held its cards when queued stopped holds them again after the restart.

// HoldSpec asks for a hold.
type HoldSpec struct {
	// Cards are the cards to hold, ascending (at least one); DeviceSpec is
	// how they were written.
	Cards      []int
	DeviceSpec string
	// Reason says why, for status ("slurm job 4242", "firmware flash").
	Reason string
	// Expires, when above 0, ends the hold that long after it is taken.
	Expires time.Duration
	// SlurmJobID is the Slurm job the hold is for: queued ends the hold
	// when that job is gone (Options.SlurmJobGone).
	SlurmJobID string
	ClientID   string
	OwnerUID   *uint32
	Owner      string
}

// ErrNotAHold refuses to release what is not a hold.
var ErrNotAHold = errors.New("not a hold")

// holdDesk takes and releases holds, and ends those whose Slurm job is
// gone.
type holdDesk struct{ *core }

// hold queues a hold at the tail of each of its cards' queues; it fails
// as Submit does.
func (s holdDesk) hold(spec HoldSpec) (JobInfo, error) {
	if len(spec.Cards) == 0 {
		return JobInfo{}, fmt.Errorf("a hold needs at least one card: %w", ErrUnknownCard)
	}
	what := "hold card " + fmt.Sprint(spec.Cards[0])
	if len(spec.Cards) > 1 {
		what = "hold cards " + spec.DeviceSpec
	}
	if spec.Reason != "" {
		what += ": " + spec.Reason
	}
	rec := store.Job{Kind: store.KindHold, Cmd: what, Cwd: "/", Repeat: 1, Reason: spec.Reason, SlurmJobID: spec.SlurmJobID,
		ClientID: spec.ClientID, OwnerUID: spec.OwnerUID, Owner: spec.Owner}
	if spec.Expires > 0 {
		rec.ExpiresAt = s.opt.Now().Add(spec.Expires)
		rec.Timeout = int64((spec.Expires + time.Second - 1) / time.Second)
	}
	infos, err := (submitter{s.core}).enqueue([]store.Job{withCards(rec, spec.Cards, spec.DeviceSpec)}, keyOf(rec.Cmd))
	if err != nil {
		return JobInfo{}, err
	}
	if !rec.ExpiresAt.IsZero() {
		s.kickExpiry()
	}
	return infos[0], nil
}

// kickExpiry makes the expiry loop look at the queued holds now.
func (c *core) kickExpiry() {
	select {
	case c.expiry <- struct{}{}:
	default: // the loop has a wake-up pending already
	}
}

// expiryLoop ends each queued hold when its expiry passes. A hold's expiry
// counts from when it was taken, so one still waiting for its cards then
// ends expired without ever taking them (an active hold's own worker ends
// it; see dispatcher.hold). It looks again at the next expiry due, when a
// hold with an expiry is queued, and at the start (holds restored by a
// restart).
func (s holdDesk) expiryLoop() {
	defer s.loops.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-s.expiry:
		case <-s.quit:
			return
		}
		if next := s.expireQueued(); !next.IsZero() {
			t.Reset(max(next.Sub(s.opt.Now()), 0))
		}
	}
}

// expireQueued ends the queued holds whose expiry has passed and returns
// the earliest expiry still to come among the others, zero for none.
func (s holdDesk) expireQueued() time.Time {
	now := s.opt.Now()
	var due []string
	var next time.Time
	s.mu.Lock()
	for id, j := range s.jobs {
		at := j.rec.ExpiresAt
		if j.rec.Kind != store.KindHold || j.rec.State != store.StateQueued || at.IsZero() {
			continue
		}
		if !now.Before(at) {
			due = append(due, id)
		} else if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	s.mu.Unlock()
	for _, id := range due {
		// One taken meanwhile is its worker's to end at its expiry.
		running := func(j *job) (JobInfo, error) { return s.infoLocked(j), nil }
		_, err := (submitter{s.core}).end(id, stopRelease, running, func(rec store.Job, now time.Time) store.Job {
			return holdRecord(rec, holdEnd{expired: true}, now)
		})
		if err != nil && !errors.Is(err, ErrFinished) && !errors.Is(err, ErrNotFound) {
			// Not recorded: it stays queued, and is tried again shortly.
			s.log.Warn("cannot end an expired hold; it stays queued", "hold", id, "err", err)
			if next.IsZero() || now.Add(time.Second).Before(next) {
				next = now.Add(time.Second)
			}
		}
	}
	return next
}

// release ends hold id: a queued one leaves its queues at once (recorded
// released), an active one lets go of its cards as soon as its worker
// sees it. why says who released it. ErrFinished when it has ended,
// ErrNotAHold for a job or a reset.
func (s holdDesk) release(id, why string) (JobInfo, error) {
	if info, err := (jobIndex{s.core}).job(id); err != nil {
		return JobInfo{}, err
	} else if info.Kind != store.KindHold {
		return info, fmt.Errorf("%s is a %s, not a hold: kill it instead: %w", id, info.Kind, ErrNotAHold)
	}
	running := func(j *job) (JobInfo, error) {
		if j.releaseWhy == "" {
			j.releaseWhy = why
		}
		j.stopFor(stopRelease)
		return s.infoLocked(j), nil
	}
	return (submitter{s.core}).end(id, stopRelease, running, func(rec store.Job, now time.Time) store.Job {
		return holdRecord(rec, holdEnd{reason: stopRelease, why: why}, now)
	})
}

// releaseSlurm releases every live hold taken for Slurm job slurmID.
func (s holdDesk) releaseSlurm(slurmID, why string) ([]JobInfo, error) {
	s.mu.Lock()
	var ids []string
	for id, j := range s.jobs {
		if j.durable && j.rec.Kind == store.KindHold && j.rec.SlurmJobID == slurmID && j.rec.State != store.StateDone {
			ids = append(ids, id)
		}
	}
	s.mu.Unlock()
	var out []JobInfo
	for _, id := range ids {
		info, err := s.release(id, why)
		if err != nil && !errors.Is(err, ErrFinished) {
			return out, err
		}
		out = append(out, info)
	}
	return out, nil
}

// slurmLoop ends, every SlurmCheckInterval, the live holds whose Slurm
// job is gone: a node that rebooted or a slurmd that crashed never ran
// the Epilog that would have released them.
func (s holdDesk) slurmLoop() {
	defer s.loops.Done()
	t := time.NewTicker(s.opt.SlurmCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.checkSlurm()
		case <-s.quit:
			return
		}
	}
}

// checkSlurm asks about each Slurm job a live hold is for, once. Queued
// holds are asked about too: a job cancelled while its Prolog waited for
// the card leaves a queued hold that would otherwise take the card and
// keep it until the next check.
func (s holdDesk) checkSlurm() {
	s.mu.Lock()
	jobs := map[string]bool{}
	for _, j := range s.jobs {
		live := j.rec.State == store.StateRunning || j.rec.State == store.StateQueued
		if j.rec.Kind == store.KindHold && live && j.rec.SlurmJobID != "" {
			jobs[j.rec.SlurmJobID] = true
		}
	}
	s.mu.Unlock()
	for id := range jobs {
		ctx, cancel := context.WithTimeout(context.Background(), slurmCheckTimeout)
		gone, why, err := s.opt.SlurmJobGone(ctx, id)
		cancel()
		if err != nil {
			s.log.Warn("cannot tell whether a held card's Slurm job is gone; the hold stays", "slurm_job", id, "err", err)
			continue
		}
		if gone {
			s.log.Info("Slurm job gone: its holds end", "slurm_job", id, "why", why)
			s.releaseSlurm(id, fmt.Sprintf("Slurm job %s is gone (%s)", id, why))
		}
	}
}

// slurmCheckTimeout bounds one question about a Slurm job.
const slurmCheckTimeout = 10 * time.Second

// holdEnd is how an active hold ended.
type holdEnd struct {
	reason  stopReason // stopRelease, stopKill, stopReset (forced), stopService
	expired bool
	why     string
}

// hold keeps an active hold until it is released, stopped or expires.
func (s dispatcher) hold(j *job) holdEnd {
	s.mu.Lock()
	stop, expires := j.stop, j.rec.ExpiresAt
	s.mu.Unlock()
	var expire <-chan time.Time
	if !expires.IsZero() {
		t := time.NewTimer(max(expires.Sub(s.opt.Now()), 0))
		defer t.Stop()
		expire = t.C
	}
	select {
	case <-stop:
		s.mu.Lock()
		defer s.mu.Unlock()
		return holdEnd{reason: j.endReason(), why: j.releaseWhy}
	case <-expire:
		return holdEnd{expired: true}
	}
}

// holdRecord is a hold's done record.
func holdRecord(rec store.Job, end holdEnd, now time.Time) store.Job {
	code := 0
	rec.State, rec.FinishedAt = store.StateDone, now
	switch {
	case end.expired:
		rec.Outcome, rec.Error = store.OutcomeExpired, "expired at "+rec.ExpiresAt.UTC().Format(time.RFC3339)
	case end.reason == stopKill:
		code, rec.Outcome, rec.Error = -1, store.OutcomeKilled, "killed by request"
	case end.reason == stopReset:
		code, rec.Outcome = -1, store.OutcomeInterrupted
		rec.Error = fmt.Sprintf("ended by a forced reset of card %d", rec.Card())
	default:
		rec.Outcome, rec.Error = store.OutcomeReleased, end.why
	}
	rec.ExitCode = &code
	return rec
}
