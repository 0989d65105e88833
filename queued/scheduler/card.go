package scheduler

import (
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ttkit/ttkit/queued/account"
	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
)

// CardState is a card's health: Resetting while a reset job runs on it,
// Dead after failed recovery (until a reset revives it or the host
// reboots), Healthy otherwise.
type CardState string

// Card states.
const (
	Healthy   CardState = "healthy"
	Resetting CardState = "resetting"
	Dead      CardState = "dead"
)

// pidWriteDelay is how long a job runs before its process record is
// written on its own; a job that ends sooner carries it in its done record.
const pidWriteDelay = 50 * time.Millisecond

// card is one card's queue and worker state, guarded by Scheduler.mu.
type card struct {
	id         int
	state      CardState
	queue      []*job // queued jobs, next first; a reset is put at the head
	est        *estimator
	current    *job   // taken for dispatch or running
	resetEpoch uint64 // completed resets; see store.Card.ResetEpoch
	reset      *job   // the pending (queued or running) reset, nil when none
	dead       *deadInfo
	last       resetResult   // the last finished reset
	paused     string        // why a dispatchable job waits (a foreign holder); "" when it does not
	rev        uint64        // changes to the card record in memory
	savedRev   uint64        // the revision last made durable
	wake       chan struct{} // capacity 1: something changed, look again
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

// idleState is the card's state when no reset runs on it.
func (c *card) idleState() CardState {
	if c.dead != nil {
		return Dead
	}
	return Healthy
}

// work is the card's worker: take the head of the queue, commit its start
// together with the previous job's end (and the card record, when a reset
// changed it), run it, repeat. With WaitForeign, a job (never a reset)
// waits while a process outside the queue holds the card.
func (s *Scheduler) work(c *card) {
	defer s.workers.Done()
	var done []*job // finished jobs whose final records are not settled yet
	var doneRecs []store.Job
	for {
		s.mu.Lock()
		if len(done) > 0 && s.persist.err != nil {
			for i, j := range done {
				s.holdLocked(j, doneRecs[i])
			}
			done, doneRecs = nil, nil
		}
		if s.foreignGateLocked(c) {
			s.mu.Unlock()
			why := s.foreignPause(c.id)
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
		next := s.takeLocked(c)
		if len(done) == 0 && next == nil {
			if s.stopping {
				s.mu.Unlock()
				return
			}
			paused := c.paused != ""
			s.mu.Unlock()
			s.idle(c, paused)
			continue
		}
		recs := append([]store.Job(nil), doneRecs...)
		if next != nil {
			recs = append(recs, next.rec)
		}
		var cards []store.Card
		var revs []uint64
		if c.dirtyLocked() {
			cards, revs = []store.Card{c.recordLocked()}, []uint64{c.rev}
		}
		s.mu.Unlock()

		err := s.st.Commit(cards, recs...)

		s.mu.Lock()
		if err != nil {
			s.failLocked(err)
			for i, j := range done {
				s.holdLocked(j, doneRecs[i])
			}
			if next != nil {
				s.unstartLocked(c, next)
			}
		} else {
			s.savedLocked(cards, revs)
			for i, j := range done {
				if doneRecs[i].State == store.StateDone {
					s.settleLocked(j, doneRecs[i])
				}
			}
		}
		done, doneRecs = nil, nil
		s.mu.Unlock()
		if err != nil || next == nil {
			continue
		}
		done, doneRecs = s.run(c, next)
	}
}

// idle waits for something to change on the card; while paused by a
// foreign holder it also looks again every ForeignRecheck.
func (s *Scheduler) idle(c *card, paused bool) {
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
// a job needs a live card and no foreign holder (with WaitForeign).
func (s *Scheduler) takeLocked(c *card) *job {
	if s.stopping || s.persist.err != nil || c.current != nil || len(c.queue) == 0 {
		return nil
	}
	head := c.queue[0]
	if !head.durable {
		return nil // its submission is still committing; FIFO waits for it
	}
	if head.rec.Kind != store.KindReset && (c.dead != nil || c.paused != "") {
		return nil
	}
	j := c.pop()
	s.queued--
	c.current = j
	if j.rec.Kind == store.KindReset {
		c.state = Resetting
	}
	j.rec.State = store.StateRunning
	j.rec.StartedAt = s.opt.Now()
	j.iterStart = j.rec.StartedAt
	j.rec.BootID = s.bootID
	j.rec.ResetEpoch = c.resetEpoch
	s.notify(j)
	return j
}

// undoStartLocked puts a job whose running record failed to commit, or
// that was stopped before its process started, back at the head of its
// queue (behind a pending reset) in memory: it never started. Its record
// reads queued again.
func (s *Scheduler) undoStartLocked(c *card, j *job) {
	j.rec.State = store.StateQueued
	j.rec.StartedAt = time.Time{}
	j.rec.Iterations, j.rec.PGID, j.rec.LeaderStart, j.rec.ResetEpoch = 0, 0, 0, 0
	if j.rec.Kind == store.KindReset {
		c.state = c.idleState()
		j.rec.BootID = s.bootID
	} else {
		j.rec.BootID = ""
	}
	j.stop, j.reason, j.log = make(chan struct{}), stopNone, nil
	c.current = nil
	c.putBack(j)
	s.queued++
	s.notify(j)
}

// unstartLocked handles a job whose running record failed to commit: it
// goes back to its queue, unless a kill was acknowledged meanwhile, in
// which case it ends killed before it started (held until the store
// recovers).
func (s *Scheduler) unstartLocked(c *card, j *job) {
	if !j.killed {
		s.undoStartLocked(c, j)
		return
	}
	c.current = nil
	rec := finishRecord(j.rec, runner.Result{Stopped: true, ExitCode: -1}, stopKill, runner.LogState{}, s.opt.Now())
	s.met.jobEnded(&rec)
	s.holdLocked(j, rec)
}

// run runs a job whose running record is durable and returns its done
// record, preceded, when a failed reset killed the card, by the records of
// the card's queued jobs that failed with it. A panic becomes a failed
// job rather than a dead worker.
func (s *Scheduler) run(c *card, j *job) (done []*job, recs []store.Job) {
	reset := j.rec.Kind == store.KindReset
	var res runner.Result
	var out recovery
	var ls runner.LogState
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("job panicked", "job", j.rec.ID, "panic", p, "stack", string(debug.Stack()))
			res = runner.Result{ExitCode: -1, Err: fmt.Errorf("internal error: %v", p)}
			out = recovery{code: -1, detail: fmt.Sprintf("internal error: %v", p)}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		now := s.opt.Now()
		c.current = nil
		s.budget.ended(j.rec.ID)
		if reset {
			done, recs = s.finishResetLocked(c, j, out, ls, now)
			return
		}
		if res.Iterations == 0 && res.Stopped && res.Err == nil && !j.killed && (j.reason == stopService || j.reason == stopReset) {
			// Stopped between its start commit and its process: it never
			// ran, so it is queued again (durably, with the next commit)
			// rather than interrupted.
			s.undoStartLocked(c, j)
			done, recs = []*job{j}, []store.Job{j.rec}
			return
		}
		rec := finishRecord(j.rec, res, j.endReason(), ls, now)
		c.learn(j.key, &rec)
		s.met.jobEnded(&rec)
		done, recs = []*job{j}, []store.Job{rec}
	}()
	log := runner.NewLog(s.outputPath(j.rec.ID), s.opt.MaxLogBytes)
	if reset {
		// A reset retried after a restart keeps the output of its
		// interrupted attempt above the new one.
		log = runner.ResumeLog(s.outputPath(j.rec.ID), s.opt.MaxLogBytes)
	}
	j.ran = make(chan struct{})
	j.pidKick = make(chan struct{}, 1)
	j.pidDone = make(chan struct{})
	s.mu.Lock()
	j.log = log
	s.notify(j)
	rec := j.rec
	s.mu.Unlock()
	// The user database is read outside the lock: it may be slow (NSS).
	spec, err := s.spec(&rec)
	spec.OnStart = func(p runner.Proc) { s.started(j, p) }
	go s.writeProcess(j)
	switch {
	case reset:
		out = s.recoverCard(c.id, j, spec, log)
	case err != nil:
		res = runner.Result{ExitCode: -1, Err: err}
	default:
		res = runner.Run(spec, log, j.stop)
	}
	close(j.ran)
	close(j.pidKick)
	<-j.pidDone
	log.Close()
	ls = log.State()
	return
}

// started records an iteration's process in memory and kicks the writer.
func (s *Scheduler) started(j *job, p runner.Proc) {
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
func (s *Scheduler) writeProcess(j *job) {
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
		failing := s.persist.err != nil
		rec := j.rec
		s.mu.Unlock()
		if failing {
			continue
		}
		if err := s.st.Put(rec); err != nil {
			s.mu.Lock()
			s.failLocked(err)
			s.mu.Unlock()
		}
	}
}

// ErrNoOwner refuses to start a job in system mode whose record names no
// user to run it as (one recorded before owners were): it never runs as
// root.
var ErrNoOwner = errors.New("the job has no recorded owner, and system mode runs every job as its owner")

// ErrOwnerChanged refuses a job whose owner's uid now names another user.
var ErrOwnerChanged = errors.New("the job's owner is gone")

// spec is how rec runs: as whom, where, in what environment. With RunAs,
// a job runs as its owner, looked up now, and an owner that cannot be
// found is an error (the job fails without starting); a reset runs as
// ResetAccount when one is set. Resets and health checks get the minimal
// environment of controlEnv, never the whole of queued's. In system mode
// everything gets a session keyring of its own, so nothing shares
// queued's (root's).
func (s *Scheduler) spec(rec *store.Job) (runner.Spec, error) {
	spec := runner.Spec{
		Shell:     s.opt.Shell,
		Cmd:       rec.Cmd,
		Dir:       rec.Cwd,
		Timeout:   time.Duration(rec.Timeout) * time.Second,
		Repeat:    rec.Repeat,
		KillGrace: s.opt.KillGrace,
		Keyring:   s.opt.RunAs,
	}
	if rec.Kind == store.KindJob {
		spec.TasksMax = s.opt.JobTasksMax
		spec.OOMScoreAdj = s.opt.JobOOMScoreAdj
		spec.Notes = true
	}
	base := s.env
	switch {
	case rec.Kind == store.KindReset && s.opt.ResetAccount != nil:
		spec.Account = s.opt.ResetAccount
		base = overrideEnv(s.ctlEnv, s.opt.ResetAccount.Env())
	case rec.Kind == store.KindReset:
		base = s.ctlEnv
	case !s.opt.RunAs:
	case rec.OwnerUID == nil:
		return spec, ErrNoOwner
	default:
		a, err := account.LookupUID(*rec.OwnerUID)
		if err != nil {
			return spec, fmt.Errorf("running the job as its owner %s: %w", rec.Owner, err)
		}
		if rec.Owner != "" && a.Name != rec.Owner {
			// The uid changed hands (or the user was renamed) since the
			// job was submitted: it is not this user's job to run.
			return spec, fmt.Errorf("uid %d is now user %s, not %s who submitted the job: %w", *rec.OwnerUID, a.Name, rec.Owner, ErrOwnerChanged)
		}
		spec.Account = &a
		base = append([]string{"PATH=" + loginPath}, a.Env()...)
	}
	spec.Env = jobEnv(base, rec)
	return spec, nil
}

// controlEnv is the environment of reset and health commands, taken from
// queued's: PATH, HOME, USER, LOGNAME, SHELL, LANG, LC_ALL, TZ, the
// variables that point tools at their code (PYTHONPATH, LD_LIBRARY_PATH,
// VIRTUAL_ENV, ARCH_NAME, as tt-metal's setup has them) and every TT_
// variable (the commands' own settings, TT_METAL_*), and nothing else. Whatever else the service's environment holds (a
// secret an admin put in the unit, a proxy with credentials) stays out of
// reset logs, which every user may read. A reset run as
// TT_DEVICE_RESET_USER gets that user's HOME, USER, LOGNAME and SHELL.
func controlEnv(env []string) []string {
	keep := map[string]bool{"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "SHELL": true, "LANG": true, "LC_ALL": true, "TZ": true,
		"PYTHONPATH": true, "LD_LIBRARY_PATH": true, "VIRTUAL_ENV": true, "ARCH_NAME": true}
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if keep[name] || strings.HasPrefix(name, "TT_") {
			out = append(out, kv)
		}
	}
	return out
}

// loginPath is the PATH a job in system mode starts with, before the
// forwarded environment (which usually brings the submitter's own).
const loginPath = "/usr/local/bin:/usr/bin:/bin"

// overrideEnv is env with the variables of over replacing its own.
func overrideEnv(env, over []string) []string {
	out := make([]string, 0, len(env)+len(over))
	names := make(map[string]bool, len(over))
	for _, kv := range over {
		name, _, _ := strings.Cut(kv, "=")
		names[name] = true
	}
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); !names[name] {
			out = append(out, kv)
		}
	}
	return append(out, over...)
}

// jobEnv is base plus the job's own variables plus the two the queue
// sets. It never sets TT_VISIBLE_DEVICES.
func jobEnv(base []string, rec *store.Job) []string {
	env := make([]string, 0, len(base)+len(rec.Env)+2)
	for _, kv := range base {
		name := kv
		if i := strings.IndexByte(kv, '='); i >= 0 {
			name = kv[:i]
		}
		if _, over := rec.Env[name]; !over {
			env = append(env, kv)
		}
	}
	for k, v := range rec.Env {
		env = append(env, k+"="+v)
	}
	return append(env, runner.JobEnvVar+"="+rec.ID, DeviceEnvVar+"="+strconv.Itoa(rec.Card()))
}
