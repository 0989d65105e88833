package scheduler

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
)

// pidWriteDelay is how long a job runs before its process record is
// written on its own; a job that ends sooner carries it in its done record.
const pidWriteDelay = 50 * time.Millisecond

// dispatcher runs each card's worker: it takes the head of the card's
// queue when the card may start it, commits its start, runs it through
// the runner (or the reset runner) and commits its end with the next
// start.
type dispatcher struct{ *core }

// work is the card's worker: take the head of the queue, commit its start
// together with the previous job's end (and the card record, when a reset
// changed it), run it, repeat. With WaitForeign, a job (never a reset)
// waits while a process outside the queue holds the card.
func (s dispatcher) work(c *card) {
	defer s.workers.Done()
	prep := starter{s.core}.startPreparer()
	defer prep.stop()
	var done []*job // finished jobs whose final records are not settled yet
	var doneRecs []store.Job
	// markPending says the job the card's slot in the start log names
	// may not have a durable record yet: the next start is committed.
	// noSlot says the start log has no slot for the card (or could not
	// be made): every start is committed.
	markPending, noSlot := false, false
	for {
		s.mu.Lock()
		if len(done) > 0 && s.persist.err != nil {
			for i, j := range done {
				s.persist.holdLocked(j, doneRecs[i])
			}
			done, doneRecs = nil, nil
		}
		if gated := s.holders.gateLocked(c); gated != nil {
			s.mu.Unlock()
			waitSettled(&s.mu, cardsByID(s.cards, gated)) // the last jobs' leftovers are no holders
			why := s.holders.pause(gated)
			s.mu.Lock()
			if why != c.paused {
				if why != "" {
					s.log.Info("card paused: a process outside the queue holds it", "card", c.id, "holder", why)
				}
				c.paused = why
				s.changes.bump()
			}
		} else {
			c.paused = ""
		}
		if cards := s.fit.dueLocked(c); cards != nil {
			s.mu.Unlock()
			if s.fit.probing(cards) {
				waitSettled(&s.mu, cardsByID(s.cards, cards)) // a site probe sees no leftover
			}
			s.fit.gate(cards)
			s.mu.Lock()
		}
		for i, j := range done {
			// The gate after a failed job says whether its card failed
			// it: then it runs again (docs/job-endings.md, R6).
			if nextAttempt(j, &doneRecs[i], failedGateAfter(&doneRecs[i], s.cardsOf(j))) {
				s.log.Info("job failed on a card that is unfit now; it runs again once the card is fit",
					"job", j.rec.ID, "outcome", doneRecs[i].Outcome, "attempt", j.rec.Attempt, "of", j.rec.Retries+1)
				s.requeueLocked(c, j)
				doneRecs[i] = j.rec
			}
		}
		if ended, recs := s.after.endUnmetLocked(c); len(ended) > 0 {
			done, doneRecs = append(done, ended...), append(doneRecs, recs...)
		}
		next := s.takeLocked(c)
		if len(done) == 0 && next == nil {
			if s.stopping {
				s.mu.Unlock()
				waitSettled(&s.mu, cardSet{c})
				return
			}
			paused := c.paused != ""
			s.mu.Unlock()
			s.idle(c, paused)
			continue
		}
		recs := append([]store.Job(nil), doneRecs...)
		var nextRec store.Job
		if next != nil {
			nextRec = next.rec
			recs = append(recs, nextRec)
		}
		var cards []store.Card
		var revs []uint64
		if c.dirtyLocked() {
			cards, revs = []store.Card{c.recordLocked()}, []uint64{c.rev}
		}
		mark := markable(s.opt.Starts, next, markPending || noSlot)
		s.mu.Unlock()

		var pre *launchPrep
		var err error
		if mark {
			pre, err = starter{s.core}.markAndPrepare(prep, c.id, &nextRec)
			if err == nil {
				var ok bool
				done, doneRecs, ok = runMarked(s, c, next, pre, endsCommit{done, doneRecs, cards, revs, recs})
				markPending = !ok
				continue
			}
			// The start log could not take it: commit it instead.
			noSlot = errors.Is(err, store.ErrNoStartSlot)
			s.log.Debug("the start log refused a start; committing it", "job", nextRec.ID, "err", err)
			err = s.st.Commit(cards, recs...)
		} else {
			pre, err = starter{s.core}.commitAndPrepare(prep, next, &nextRec, cards, recs)
		}

		s.mu.Lock()
		endsCommit{done, doneRecs, cards, revs, recs}.landedLocked(s.core, err)
		switch {
		case err != nil && next != nil:
			s.startNotRecordedLocked(c, next)
		case err == nil:
			// Whatever the card's slot names has its record durable now
			// (see markstart.go).
			markPending = false
			if next != nil {
				next.startCommitted = true
			}
		}
		done, doneRecs = nil, nil
		s.mu.Unlock()
		if err != nil || next == nil {
			pre.cancel()
			continue
		}
		waitSettled(&s.mu, s.cardsOf(next))
		done, doneRecs = s.run(c, next, pre)
	}
}

// idle waits for something to change on the card; while paused by a
// foreign holder it also looks again every ForeignRecheck.
func (s dispatcher) idle(c *card, paused bool) {
	if !paused {
		<-c.wake
		return
	}
	t := time.NewTimer(s.opt.ForeignRecheck)
	defer t.Stop()
	select {
	case <-c.wake:
	case <-t.C:
	}
}

// takeLocked removes the head of the card's queue and marks it running in
// memory, if dispatch is allowed and the head's insert is durable. A reset
// runs on a dead card (to revive it) and never waits for a foreign holder;
// a job or a hold needs a live card and no foreign holder (with
// WaitForeign), and one of several cards needs all of them: at the head of
// every one of their queues, each free and alive. It is then taken from
// every queue and is the current job of every card (see span.go).
func (s dispatcher) takeLocked(c *card) *job {
	wasWaiting := c.waiting != ""
	c.waiting = ""
	if s.stopping || s.persist.err != nil || c.current != nil || len(c.queue) == 0 {
		return nil
	}
	head := c.head()
	if head == nil {
		return nil // every queued job waits for a dependency (after.go)
	}
	if !head.durable {
		return nil // its submission is still committing; FIFO waits for it
	}
	if at := head.rec.ExpiresAt; head.rec.Kind == store.KindHold && !at.IsZero() && !s.opt.Now().Before(at) {
		// Expired while it waited: the expiry loop ends it (and so wakes
		// the card) rather than it being taken, and shown active, after.
		s.kickExpiry()
		return nil
	}
	if head.isWork() && (c.dead != nil || c.paused != "") || gatedJob(head) && c.unfit != "" {
		return nil
	}
	cards := cardSet{c}
	if head.spans() {
		cards = s.cardsOf(head)
		if ok, why := cards.readyFor(head, c); !ok {
			if !wasWaiting {
				// The idle time this wait costs the card counts from the
				// first look that found it waiting.
				c.waitSince = s.opt.Now()
			}
			c.waiting = why
			return nil
		}
	}
	for _, cd := range cards {
		cd.take(head)
		cd.current = head
		cd.waiting = ""
	}
	j := head
	s.queued--
	if j.rec.Kind == store.KindReset {
		c.state = Recovering
	}
	j.rec.State = store.StateRunning
	if j.rec.Kind != store.KindHold || j.rec.StartedAt.IsZero() {
		j.rec.StartedAt = s.opt.Now() // a hold taken again after a restart keeps its start
	}
	j.iterStart = j.rec.StartedAt
	j.rec.BootID = s.bootID
	j.rec.ResetEpoch = c.resetEpoch
	if j.spans() {
		j.rec.ResetEpochs = make([]uint64, len(cards))
		for i, cd := range cards {
			j.rec.ResetEpochs[i] = cd.resetEpoch
		}
	}
	s.notify(j)
	return j
}

// requeueLocked puts a job whose running record failed to commit, or
// that was stopped before its process started, back at the head of its
// queue (behind a pending reset) in memory: it never started. Its record
// reads queued again.
func (s dispatcher) requeueLocked(c *card, j *job) {
	j.rec.State = store.StateQueued
	j.rec.StartedAt = time.Time{}
	j.rec.Iterations, j.rec.PGID, j.rec.LeaderStart, j.rec.ResetEpoch = 0, 0, 0, 0
	if j.rec.Kind == store.KindReset {
		c.state = c.idleState()
		j.rec.BootID = s.bootID
	} else {
		j.rec.BootID = ""
	}
	j.rec.ResetEpochs = nil
	j.stop, j.reason, j.log = make(chan struct{}), stopNone, nil
	j.startCommitted, j.stopEarly = false, false
	cards := s.cardsOf(j)
	for _, cd := range cards {
		cd.current = nil
	}
	cards.putBack(j)
	s.queued++
	s.notify(j)
	cards.wakeup()
}

// startNotRecordedLocked handles a job whose running record failed to commit: it
// goes back to its queue, unless a kill was acknowledged meanwhile, in
// which case it ends killed before it started (held until the store
// recovers).
func (s dispatcher) startNotRecordedLocked(c *card, j *job) {
	if !j.killed {
		s.requeueLocked(c, j)
		return
	}
	cards := s.cardsOf(j)
	for _, cd := range cards {
		cd.current = nil
	}
	cards.wakeup()
	rec := finishRecord(j.rec, runner.Result{Stopped: true, ExitCode: -1}, stopKill, runner.LogState{}, s.opt.Now())
	s.met.jobEnded(&rec)
	s.persist.holdLocked(j, rec)
}

// run runs a job whose running record is durable, its start prepared
// meanwhile (pre; nil for a reset or a hold), and returns its done
// record, preceded, when a failed reset killed the card, by the records of
// the card's queued jobs that failed with it. A panic becomes a failed
// job rather than a dead worker.
func (s dispatcher) run(c *card, j *job, pre *launchPrep) (done []*job, recs []store.Job) {
	reset, hold := j.rec.Kind == store.KindReset, j.rec.Kind == store.KindHold
	var res runner.Result
	var held holdEnd
	var out recovery
	var ls runner.LogState
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("job panicked", "job", j.rec.ID, "panic", p, "stack", string(debug.Stack()))
			res = runner.Result{ExitCode: -1, Err: fmt.Errorf("internal error: %v", p)}
			out = recovery{code: -1, detail: fmt.Sprintf("internal error: %v", p)}
		}
		s.fence.revoke(j) // before its cards are free for the next job's grant
		s.mu.Lock()
		defer s.mu.Unlock()
		now := s.opt.Now()
		cards := cardSet{c}
		if j.spans() {
			cards = s.cardsOf(j)
		}
		for _, cd := range cards {
			cd.current = nil
			cd.settled = res.Settled
		}
		j.swept = res.Settled
		cards.wakeup()
		if hold && held.reason == stopService && !held.expired {
			// A hold outlives a stop of queued: its record stays active
			// and the next start holds its cards again.
			done, recs = []*job{j}, []store.Job{j.rec}
			return
		}
		if hold {
			rec := holdRecord(j.rec, held, now)
			s.met.jobEnded(&rec)
			done, recs = []*job{j}, []store.Job{rec}
			return
		}
		if reset {
			s.budget.ended(j.rec.ID, ls.Disk, j.rec.OwnerUID)
			done, recs = s.resets.finishLocked(c, j, out, ls, now)
			return
		}
		if res.Iterations == 0 && res.Stopped && res.Err == nil && !j.killed && (j.reason == stopService || j.reason == stopReset && j.stopEarly) {
			// Stopped before its process: it never ran, so it is queued
			// again (durably, with the next commit) rather than
			// interrupted. A reset that came once its start was committed
			// (its helper prepared) interrupts it, as it interrupts a job
			// whose helper had started.
			s.budget.ended(j.rec.ID, ls.Disk, j.rec.OwnerUID)
			s.requeueLocked(c, j)
			done, recs = []*job{j}, []store.Job{j.rec}
			return
		}
		rec := finishRecord(j.rec, res, j.endReason(), ls, now, j.crossKill)
		s.fit.jobEndedLocked(cards, &rec)
		s.met.jobEnded(&rec)
		if nextAttempt(j, &rec, byItsCard(&rec, j.reason)) {
			// Its card's doing: run again once the card is fit; the
			// queued record commits with the next one.
			s.log.Info("job ended because of its card; it runs again once the card is fit",
				"job", j.rec.ID, "outcome", rec.Outcome, "attempt", j.rec.Attempt, "of", j.rec.Retries+1)
			s.requeueLocked(c, j)
			done, recs = []*job{j}, []store.Job{j.rec}
			return
		}
		// Counted once its last attempt is over: the output budget
		// never deletes the file of a job that will run again.
		s.budget.ended(j.rec.ID, ls.Disk, j.rec.OwnerUID)
		for _, cd := range cards {
			cd.learn(j.key, &rec)
		}
		done, recs = []*job{j}, []store.Job{rec}
	}()
	if hold {
		if err := s.fence.grant(j); err != nil {
			s.log.Error("a hold's user cannot open its cards", "hold", j.rec.ID, "err", err)
		}
		held = s.hold(j)
		return
	}
	if pre == nil {
		s.mu.Lock()
		rec := j.rec
		s.mu.Unlock()
		if reset {
			pre = &launchPrep{log: starter{s.core}.jobLog(&rec)}
			pre.spec, pre.err = s.launch.spec(&rec)
		} else {
			pre = starter{s.core}.prepare(rec)
		}
	}
	defer pre.helper.Cancel() // a start that did not reach runner.Run
	log := pre.log
	if !reset && j.rec.Retries > 0 {
		log.Write([]byte(attemptHeader(&j.rec)))
	}
	j.ran = make(chan struct{})
	j.pidKick = make(chan struct{}, 1)
	j.pidDone = make(chan struct{})
	s.mu.Lock()
	j.log = log
	s.notify(j)
	s.mu.Unlock()
	spec, err := pre.spec, pre.err
	if err == nil && !reset {
		err = s.fence.grant(j)
	}
	spec.OnStart = func(p runner.Proc) { s.started(j, p) }
	go s.writeProcess(j)
	switch {
	case reset:
		out = s.resets.recoverCard(c.id, j, spec, log)
	case err != nil:
		res = runner.Result{ExitCode: -1, Err: err}
	default:
		spec.Prepared = pre.helper
		res = runner.Run(spec, log, j.stop)
	}
	if a := res.Abandoned; a != nil {
		// The card moves on; the process stays under the runner's watch
		// (runner.AbandonedProcs) and counts as a holder outside the
		// queue while it holds the card.
		s.log.Warn("a job's process did not die after SIGKILL; the card moves on without it",
			"job", j.rec.ID, "pid", a.PID, "reason", a.Reason)
	}
	close(j.ran)
	close(j.pidKick)
	<-j.pidDone
	log.Close()
	ls = log.State()
	return
}

// started records an iteration's process in memory and kicks the writer.
func (s dispatcher) started(j *job, p runner.Proc) {
	s.mu.Lock()
	j.rec.PGID, j.rec.LeaderStart = p.PID, p.Start
	j.rec.Iterations++
	j.iterStart = s.opt.Now()
	s.mu.Unlock()
	select {
	case j.pidKick <- struct{}{}:
	default:
	}
}

// writeProcess commits the running job's process identity once it has run
// for pidWriteDelay, so a crash later finds the group by record; shorter
// jobs carry it in their done record instead.
func (s dispatcher) writeProcess(j *job) {
	defer close(j.pidDone)
	for range j.pidKick {
		t := time.NewTimer(pidWriteDelay)
		select {
		case <-t.C:
		case <-j.ran:
			t.Stop()
			return
		}
		s.mu.Lock()
		recorded := j.startRecorded
		s.mu.Unlock()
		if recorded != nil {
			<-recorded // a marked start's running record goes first
		}
		s.mu.Lock()
		failing := s.persist.err != nil
		rec := j.rec
		s.mu.Unlock()
		if failing {
			continue
		}
		if err := s.st.Put(rec); err != nil {
			s.mu.Lock()
			s.persist.failLocked(err)
			s.mu.Unlock()
		}
	}
}
