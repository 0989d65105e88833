package scheduler

import (
	"errors"
	"fmt"
	"time"

	"github.com/ttkit/ttkit/queued/store"
)

// ErrNoControls means no reset or health check command is configured.
var ErrNoControls = errors.New("no reset or health check command configured (TT_DEVICE_RESET_CMD, TT_DEVICE_HEALTH_CHECK_CMD)")

// ErrResetRunning refuses to kill a running reset: stopping a reset half
// way leaves the card in an unknown state, and each of its commands ends
// by its own timeout.
var ErrResetRunning = errors.New("a running reset cannot be killed; each of its commands ends by its own timeout")

// resetDesk takes reset requests: it puts a reset job at the head of each
// card's queue (or joins the pending one), and stops the card's running
// job when the request may.
type resetDesk struct{ *core }

// ResetRequest asks for card resets: of Card, of the card JobID ran on,
// or (neither set) of every card. JobID is a full id (see Resolve).
type ResetRequest struct {
	Card *int
	// Cards, when set, are several cards to reset (Card is the first).
	Cards []int
	JobID string
	// NoInterrupt lets the card's running job finish before the reset
	// runs; by default it is stopped (the kill ladder: SIGINT, SIGTERM,
	// SIGKILL) and recorded as interrupted by the reset.
	NoInterrupt bool
	// MayInterrupt, when set, decides whether this request may interrupt
	// the card's running job (a shared daemon lets a non-admin interrupt
	// only their own jobs); when it says no, the reset waits for the job
	// instead. It is called with the scheduler's lock held: it must not
	// block.
	MayInterrupt func(running store.Job) bool
	// Force lets the reset interrupt a hold on the card (which it waits
	// for otherwise), and run under a process of someone else holding the
	// card (which it waits for otherwise: foreignwait.go): an admin's
	// decision, say for a card a Slurm job holds while it misbehaves. The
	// reset's log says who forced it.
	Force bool
	// Automatic marks queued's own recovery of an unfit card, asked by no
	// one: it waits for every process outside the queue holding the card.
	Automatic bool
	// OwnerUID and Owner record who asked for the reset on its job.
	OwnerUID *uint32
	Owner    string
}

// ResetOutcome is what a reset request did on one card.
type ResetOutcome struct {
	Card int
	// Job is the reset job: new, or the pending one the request joined
	// (Coalesced). Empty when Skipped.
	JobID string
	State store.State
	// Coalesced means a reset of the card was already queued or running.
	Coalesced bool
	// Skipped means nothing was scheduled; Reason says why.
	Skipped bool
	Reason  string
	// Interrupted is the running job this reset stops, if any.
	Interrupted string
	// WaitsFor is the running job the reset waits for instead, and
	// WaitsForOwner that job's owner: the request did not interrupt it
	// (NoInterrupt, or MayInterrupt said no).
	WaitsFor, WaitsForOwner string
	// OnHold says the running job waited for or interrupted is a hold.
	OnHold bool
}

// request schedules resets and returns at once, once every new reset job is
// durable. A reset job goes to the head of its card's queue and, unless
// NoInterrupt, stops the card's running job. Duplicate requests coalesce
// into the card's pending (queued or running) reset. A job-based request
// is skipped when the card has been reset since the job started (the
// job's reset epoch is behind the card's), when the host has rebooted
// since, when the job never started, or when the card is dead (only a
// reset by card revives a dead card). Resets of every card treat each card
// as a reset by card, dead ones included. It fails with ErrUnknownCard,
// ErrNotFound, ErrStopping, ErrPersistence or ErrNoControls.
func (s resetDesk) request(req ResetRequest) ([]ResetOutcome, error) {
	var target store.Job
	if req.JobID != "" {
		info, err := (jobIndex{s.core}).job(req.JobID)
		if err != nil {
			return nil, err
		}
		target = info.Job
	}
	s.mu.Lock()
	switch {
	case s.stopping:
		s.mu.Unlock()
		return nil, ErrStopping
	case s.persist.err != nil:
		err := s.persist.err
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: %w", ErrPersistence, err)
	case s.opt.Controls.Reset == "" || s.opt.Controls.HealthCheck == "":
		s.mu.Unlock()
		return nil, ErrNoControls
	}
	var cards []*card
	var skipped []ResetOutcome
	switch {
	case req.JobID != "":
		if j := s.jobs[req.JobID]; j != nil {
			target = j.rec // the latest, if it started meanwhile
		}
		// Every card of the job, each unless it was reset since the job
		// started there.
		for i, id := range target.Cards() {
			c := s.cards[id]
			if c == nil {
				s.mu.Unlock()
				return nil, fmt.Errorf("job %s ran on card %d, which is no longer configured: %w", req.JobID, id, ErrUnknownCard)
			}
			epoch := target.ResetEpoch
			if i < len(target.ResetEpochs) {
				epoch = target.ResetEpochs[i]
			}
			if why := s.skipLocked(c, &target, epoch); why != "" {
				skipped = append(skipped, ResetOutcome{Card: c.id, Skipped: true, Reason: why})
				continue
			}
			cards = append(cards, c)
		}
		if len(cards) == 0 {
			s.mu.Unlock()
			return skipped, nil
		}
	case req.Card != nil:
		ids := req.Cards
		if len(ids) == 0 {
			ids = []int{*req.Card}
		}
		for _, id := range ids {
			c := s.cards[id]
			if c == nil {
				s.mu.Unlock()
				return nil, fmt.Errorf("card %d: %w", id, ErrUnknownCard)
			}
			cards = append(cards, c)
		}
	default:
		for _, id := range s.order {
			cards = append(cards, s.cards[id])
		}
	}

	out := make([]ResetOutcome, len(cards))
	resets := make([]*job, len(cards)) // each card's reset job, new or joined
	var fresh []*job
	var recs []store.Job
	now := s.opt.Now()
	for i, c := range cards {
		out[i].Card = c.id
		if j := c.reset; j != nil {
			askLocked(j, &req)
			out[i].Coalesced = true
			if !req.NoInterrupt {
				j.interrupt = true
			}
			resets[i] = j
			continue
		}
		card := c.id
		j := newJob(store.Job{
			ID: store.NewID(), Seq: s.nextSeq, Kind: store.KindReset, Device: &card,
			Cmd: fmt.Sprintf("reset card %d", c.id), Cwd: s.opt.Controls.Dir,
			Timeout: int64(s.opt.Controls.total() / time.Second), Repeat: 1,
			State: store.StateQueued, SubmittedAt: now, BootID: s.bootID, OwnerUID: req.OwnerUID, Owner: req.Owner,
		}, false)
		j.interrupt = !req.NoInterrupt
		askLocked(j, &req)
		s.nextSeq++
		c.pushFront(j)
		c.reset = j
		s.jobs[j.rec.ID] = j
		s.queued++
		resets[i] = j
		fresh = append(fresh, j)
		recs = append(recs, j.rec)
	}
	s.mu.Unlock()

	err := s.st.Put(recs...)

	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		for _, j := range fresh {
			c := s.cards[j.rec.Card()]
			c.remove(j)
			c.reset = nil
			delete(s.jobs, j.rec.ID)
			s.queued--
			s.notify(j)
		}
		s.persist.failLocked(err)
		return nil, fmt.Errorf("%w: %w", ErrPersistence, err)
	}
	for _, j := range fresh {
		j.durable = true
		s.log.Info("reset scheduled", "card", j.rec.Card(), "reset", j.rec.ID)
		s.notify(j)
	}
	// A pending reset this request joined may still be committing; answer
	// only once it is durable, or fail if its insert failed.
	for _, j := range resets {
		for !j.durable {
			if s.jobs[j.rec.ID] != j {
				return nil, fmt.Errorf("%w: the pending reset of card %d could not be stored", ErrPersistence, j.rec.Card())
			}
			ch := j.changed
			s.mu.Unlock()
			<-ch
			s.mu.Lock()
		}
	}
	for i, c := range cards {
		j := resets[i]
		out[i].JobID, out[i].State = j.rec.ID, j.rec.State
		if j.rec.State == store.StateQueued && c.current != nil && c.current.rec.Kind != store.KindReset {
			cur := c.current.rec
			// A hold is interrupted only by force; a job when the request
			// may (see MayInterrupt).
			may := cur.Kind == store.KindHold && req.Force ||
				cur.Kind == store.KindJob && j.interrupt && (req.MayInterrupt == nil || req.MayInterrupt(cur))
			out[i].OnHold = cur.Kind == store.KindHold
			if may {
				c.current.stopFor(stopReset)
				out[i].Interrupted = cur.ID
			} else {
				out[i].WaitsFor, out[i].WaitsForOwner = cur.ID, cur.Owner
			}
		}
		c.wakeup()
	}
	return append(out, skipped...), nil
}

// skipLocked says why a reset requested for job rec need not run on card
// c, or "" when it should.
func (s resetDesk) skipLocked(c *card, rec *store.Job, epoch uint64) string {
	id := rec.ID
	switch {
	case c.dead != nil:
		return fmt.Sprintf("card %d is dead (%s); a reset for a job does not revive it: reset --device %d tries recovery again",
			c.id, c.dead.reason, c.id)
	case rec.StartedAt.IsZero():
		return fmt.Sprintf("job %s has not run on card %d; nothing to recover from (reset --device %d resets the card anyway)", id, c.id, c.id)
	case rec.BootID != "" && s.bootID != "" && rec.BootID != s.bootID:
		return fmt.Sprintf("the host has rebooted since job %s ran on card %d", id, c.id)
	case c.reset != nil:
		return "" // joins the pending reset
	case c.resetEpoch > epoch:
		return fmt.Sprintf("card %d was reset since job %s ran (reset %s at %s, result %s)",
			c.id, id, c.last.id, c.last.at.UTC().Format(time.RFC3339), c.last.result)
	}
	return ""
}
