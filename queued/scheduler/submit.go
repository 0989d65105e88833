package scheduler

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
)

// submitter takes jobs into the queues and out of them again: submission
// and kill.
type submitter struct{ *core }

// JobSpec is a validated submission. The API checks every field against
// the limits; the scheduler checks only what depends on its state.
type JobSpec struct {
	// Card is the job's card; Cards, when it has several, lists every one
	// (ascending; Card is ignored then) and DeviceSpec how they were
	// written ("0,1", "0-3"), which the job sees in TT_QUEUE_DEVICE.
	Card       int
	Cards      []int
	DeviceSpec string
	Cmd        string
	Cwd        string
	Env        map[string]string
	Timeout    time.Duration // 0 selects the default
	Repeat     int           // less than 1 means 1
	// IdleTimeout ends the job as hung when it writes no output for that
	// long; 0 selects Options.DefaultIdleTimeout (itself 0, off, by
	// default). Whole seconds.
	IdleTimeout time.Duration
	// Retries is how many times the job runs again after ending because
	// of its card (see byItsCard), 0 to api.MaxRetries.
	Retries  int
	ClientID string
	// Agent is the AI agent that queued the job, validated by the API.
	Agent string
	// OwnerUID is the submitter's uid, from the kernel; nil when unknown.
	// In system mode (Options.Mode) the job runs as this user.
	OwnerUID *uint32
	// Owner is the submitter's user name, for display.
	Owner string

	// EnvFromShell names the Env entries taken from the submitter's shell.
	EnvFromShell []string

	// After lists the whole ids of the jobs this one waits for (the API
	// has resolved and checked them); AfterMode which of their endings
	// let it run (empty: store.AfterOK). See after.go.
	After     []string
	AfterMode store.AfterMode

	// Array, when set, queues one element per index (api.ParseArray),
	// each an ordinary job with its index; see SubmitArray.
	Array []int
}

// cards is the spec's cards, ascending.
func cardsOfSpec(card int, cards []int) []int {
	if len(cards) > 0 {
		return cards
	}
	return []int{card}
}

// withCards sets rec's card fields for cards (and the spec as written).
func withCards(rec store.Job, cards []int, spec string) store.Job {
	first := cards[0]
	rec.Device = &first
	if len(cards) > 1 {
		rec.Devices = append([]int(nil), cards...)
		rec.DeviceSpec = spec
	}
	return rec
}

// submit durably queues a job at the tail of its card's queue (of each of
// its cards' queues) and returns it with its position and estimated wait.
// It fails with ErrUnknownCard, ErrStopping, ErrPersistence (also when
// this very insert fails), ErrCardDead or ErrQueueFull (a
// *QueueFullError: the owner's share of the queue, or the whole of it, is
// taken).
func (s submitter) submit(spec JobSpec) (JobInfo, error) {
	rec, key, err := s.record(&spec)
	if err != nil {
		return JobInfo{}, err
	}
	infos, err := s.enqueue([]store.Job{rec}, key)
	if err != nil {
		return JobInfo{}, err
	}
	return infos[0], nil
}

// submitArray queues one job per index of spec.Array, all or none, in
// one commit: each sees its index and the array's id, and the array
// counts one job per element against the queue's bounds.
func (s submitter) submitArray(spec JobSpec) ([]JobInfo, error) {
	if len(spec.Array) == 0 || len(spec.Array) > api.MaxArray {
		return nil, fmt.Errorf("an array of %d elements: want 1 to %d: %w", len(spec.Array), api.MaxArray, ErrInvalid)
	}
	rec, key, err := s.record(&spec)
	if err != nil {
		return nil, err
	}
	rec.ArrayID = store.NewID()
	recs := make([]store.Job, len(spec.Array))
	for i, idx := range spec.Array {
		recs[i] = rec
		recs[i].ArrayIndex = idx
	}
	return s.enqueue(recs, key)
}

// record is the queued record spec asks for, its cards set, and the key
// of its command.
func (s submitter) record(spec *JobSpec) (store.Job, cmdKey, error) {
	if err := checkEndings(spec); err != nil {
		return store.Job{}, cmdKey{}, err
	}
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = s.opt.DefaultTimeout
	}
	idle := spec.IdleTimeout
	if idle == 0 {
		idle = s.opt.DefaultIdleTimeout
	}
	rec := store.Job{
		Kind: store.KindJob, Cmd: spec.Cmd, Cwd: spec.Cwd, Env: spec.Env, EnvFromShell: spec.EnvFromShell,
		Timeout: int64((timeout + time.Second - 1) / time.Second), Repeat: max(spec.Repeat, 1),
		ClientID: spec.ClientID, Agent: spec.Agent, OwnerUID: spec.OwnerUID, Owner: spec.Owner,
		IdleTimeout: int64((idle + time.Second - 1) / time.Second), Retries: spec.Retries, Attempt: 1,
		After: spec.After, AfterMode: spec.AfterMode,
	}
	if len(rec.After) > 0 && rec.AfterMode == "" {
		rec.AfterMode = store.AfterOK
	}
	return withCards(rec, cardsOfSpec(spec.Card, spec.Cards), spec.DeviceSpec), keyOf(spec.Cmd), nil
}

// enqueue gives each of recs (a job or a hold, or an array's elements;
// their cards set, the same for all) an id and a place at the tail of
// each of its cards' queues, all or none, and returns once they are
// durable, in one commit.
func (s submitter) enqueue(recs []store.Job, key cmdKey) ([]JobInfo, error) {
	first := &recs[0]
	// The records of the jobs they wait for are read without the lock;
	// one that ends meanwhile is read again.
	deps, err := s.after.records(first.After)
	if err != nil {
		return nil, err
	}
	var cards cardSet
	var wait *afterWait
	for {
		s.mu.Lock()
		cards, err = s.admitLocked(first, len(recs), nil)
		if errors.Is(err, errAskExempt) {
			// Only now may the owner's share matter. Whether they are exempt
			// may read the user database: asked without the lock.
			s.mu.Unlock()
			exempt := s.opt.Exempt(*first.OwnerUID)
			s.mu.Lock()
			cards, err = s.admitLocked(first, len(recs), &exempt)
		}
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		var stale []string
		if wait, stale = s.after.waitLocked(first, deps); len(stale) == 0 {
			break
		}
		s.mu.Unlock()
		again, err := s.after.records(stale)
		if err != nil {
			return nil, err
		}
		maps.Copy(deps, again)
	}
	jobs := make([]*job, len(recs))
	for i := range recs {
		rec := &recs[i]
		rec.ID, rec.Seq, rec.State, rec.SubmittedAt = store.NewID(), s.nextSeq, store.StateQueued, s.opt.Now()
		// Memory keeps the record brief; the store gets it whole, once.
		j := newKeyedJob(rec.Briefed(), key, false)
		if wait != nil {
			w := *wait
			w.pending = maps.Clone(wait.pending)
			s.after.watchLocked(j, &w)
		}
		s.nextSeq++
		cards.push(j)
		s.jobs[j.rec.ID] = j
		s.queued++
		jobs[i] = j
	}
	s.mu.Unlock()

	err = s.st.Put(recs...)

	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		for _, j := range jobs {
			cards.remove(j)
			delete(s.jobs, j.rec.ID)
			j.after = nil // never queued: the jobs it waited for forget it
			s.queued--
		}
		s.persist.failLocked(err)
		cards.wakeup()
		return nil, fmt.Errorf("%w: %w", ErrPersistence, err)
	}
	infos := make([]JobInfo, len(jobs))
	for _, j := range jobs {
		j.durable = true
	}
	s.changes.bump()
	cards.wakeup()
	for i, j := range jobs {
		if dead := cards.anyDead(); dead != nil && cards.remove(j) {
			// A card died while this insert committed, after its queue was
			// failed: fail these jobs the same way.
			err = s.failDeadLocked(dead, j)
			continue
		}
		if j.spans() {
			infos[i] = s.infoLocked(j)
		} else {
			infos[i] = s.fromTailLocked(cards[0], j)
		}
	}
	if err != nil {
		return nil, err
	}
	return infos, nil
}

// errAskExempt is admitLocked asking whether the owner is exempt.
var errAskExempt = errors.New("is the owner exempt from the per-user limit?")

// admitLocked decides whether rec may join its cards' queues now, and
// returns them: not while the service stops or writes fail, not on a dead
// card, not past its owner's share of the queue (Options.MaxQueuedPerUser)
// nor past the whole queue (MaxQueued). exempt says whether rec's owner
// is exempt from the share; nil when not known yet, in which case
// errAskExempt asks for it once the share may matter.
func (s submitter) admitLocked(rec *store.Job, n int, exempt *bool) (cardSet, error) {
	var cards cardSet
	for _, id := range rec.Cards() {
		c := s.cards[id]
		if c == nil {
			return nil, fmt.Errorf("card %d: %w", id, ErrUnknownCard)
		}
		cards = append(cards, c)
	}
	switch {
	case s.stopping:
		return nil, ErrStopping
	case s.persist.err != nil:
		return nil, fmt.Errorf("%w: %w", ErrPersistence, s.persist.err)
	case cards.anyDead() != nil:
		return nil, cards.anyDead().deadErrLocked()
	}
	if rec.OwnerUID != nil && s.queued+n > s.opt.MaxQueuedPerUser {
		if exempt == nil {
			return nil, errAskExempt
		}
		if count := s.queuedOfLocked(*rec.OwnerUID); count+n > s.opt.MaxQueuedPerUser && !*exempt {
			return nil, &QueueFullError{PerUser: true, UID: *rec.OwnerUID, Owner: rec.Owner, Count: count, Limit: s.opt.MaxQueuedPerUser, Adding: n}
		}
	}
	if s.queued+n > s.opt.MaxQueued {
		full := s.fullLocked(rec)
		full.Adding = n
		return nil, full
	}
	return cards, nil
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
		return JobInfo{Job: j.rec, Position: i + 1, EstimatedRun: run, EstimateKnown: c.estimateKnown(j),
			EstimatedWait: c.tailWait(s.opt.Now()) - behind - run}
	}
	return s.infoLocked(j)
}

// kill stops a job: a queued one (a queued reset too) is removed from its
// queue and recorded as killed (exit -1) before the answer; a running one
// climbs the kill ladder (SIGINT, SIGTERM, SIGKILL), and is recorded when it
// ends. Exactly one of several concurrent kills of a queued job takes
// effect; the others wait for its record and get ErrFinished, as for any
// finished job. While writes fail, a queued job cannot be killed
// (ErrPersistence): it stays queued, and nothing starts meanwhile anyway.
// ErrResetRunning for a running reset.
func (s submitter) kill(id string) (JobInfo, error) {
	running := func(j *job) (JobInfo, error) {
		if j.rec.Kind == store.KindReset {
			return s.infoLocked(j), fmt.Errorf("reset %s of card %d: %w", id, j.rec.Card(), ErrResetRunning)
		}
		j.stopFor(stopKill)
		return s.infoLocked(j), nil
	}
	return s.end(id, stopKill, running, func(rec store.Job, now time.Time) store.Job {
		return finishRecord(rec, runner.Result{Stopped: true}, stopKill, runner.LogState{}, now)
	})
}

// end ends job id, for a kill or a release: a running one is handed to
// running (called with the lock held), a queued one leaves every queue
// and gets the record queued makes of it, durably, before the answer.
// Exactly one of several concurrent ends of a queued job takes effect;
// the others wait for its record and get ErrFinished, as for any finished
// job. While writes fail, a queued job stays queued (ErrPersistence).
func (s submitter) end(id string, reason stopReason, running func(*job) (JobInfo, error), queued func(store.Job, time.Time) store.Job) (JobInfo, error) {
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
		// Another end (or a dead card) is recording it: answer with that
		// record.
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
	case j.rec.State == store.StateRunning:
		info, err := running(j)
		s.mu.Unlock()
		return info, err
	case s.persist.err != nil:
		err := s.persist.err
		s.mu.Unlock()
		return JobInfo{}, fmt.Errorf("job %s stays queued: %w: %w", id, ErrPersistence, err)
	}
	c := s.cards[j.rec.Card()]
	cards := s.cardsOf(j)
	cards.remove(j)
	if c.reset == j {
		c.reset = nil // a reset request now schedules a new one
	}
	s.queued--
	j.ending = true
	rec := queued(j.rec, s.opt.Now())
	s.mu.Unlock()
	err := s.st.Put(rec)
	s.mu.Lock()
	defer s.mu.Unlock()
	j.ending = false
	if err != nil {
		// Not recorded, so not ended: back to its place in the queues.
		s.persist.failLocked(err)
		cards.reinsert(j)
		if j.rec.Kind == store.KindReset && c.reset == nil {
			c.reset = j
		}
		s.queued++
		s.notify(j)
		return JobInfo{}, fmt.Errorf("job %s stays queued: %w: %w", id, ErrPersistence, err)
	}
	j.stopFor(reason)
	s.met.jobEnded(&rec)
	s.settleLocked(j, rec)
	cards.wakeup()
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
