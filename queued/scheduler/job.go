package scheduler

import (
	"fmt"
	"strings"
	"time"

	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
)

// stopReason says who stopped a running job, which decides its outcome.
type stopReason int

const (
	stopNone    stopReason = iota
	stopKill               // a kill request
	stopService            // the service is stopping
	stopReset              // a reset of its card
	stopRelease            // a hold released (by request, or its Slurm job is gone)
)

// job is a queued or running job in memory, or a finished one whose record
// is not yet settled. Every field is guarded by core.mu except where
// noted.
type job struct {
	// rec is the job's record, brief (store.Job.Briefed): the command cut
	// to a preview, no environment, so a thousand queued jobs cost the
	// same whatever their commands; the store holds the whole, read when
	// the job starts (dispatcher.run) and when asked for (Record).
	rec     store.Job
	key     cmdKey // its command, for the estimates
	durable bool   // the queued record is committed; before that the job is not dispatched or visible
	held    bool   // finished, record held in memory by a persistence failure
	ending  bool   // failed with its dead card; its done record is being committed
	// after is what the job still waits for of the jobs it was queued
	// after (store.Job.After); nil when it was queued after none.
	after *afterWait

	// interrupt, on a reset job, asks that the card's running job be
	// stopped once the reset is durable (the default; a request may let
	// the running job finish instead).
	interrupt bool
	// ask, on a reset job, is who asked for it, for its wait for someone
	// else's process holding the card (foreignwait.go); under core.mu.
	ask *resetAsk

	// iterStart is when the current iteration started (the job's start
	// until its first process has started).
	iterStart time.Time

	log    *runner.Log
	stop   chan struct{} // closed (once, via stopFor) to stop the job
	reason stopReason
	// releaseWhy says who released a hold, or why it ended by itself.
	releaseWhy string
	// crossKill, when set, is why crossWatch killed the job (a card
	// outside its own, with TT_DEVICE_CROSS_CARD=kill): its record's error.
	crossKill string
	// killed is set by a kill request even when another stop came first:
	// a job whose kill was acknowledged ends killed, never queued again.
	killed  bool
	changed chan struct{} // closed and replaced at every transition

	ran chan struct{} // closed when the runner returns; ends the process-record writer
	// startCommitted is set once the job's running record is durable:
	// from then on its start is under way (its exec helper is prepared
	// while the commit is in flight, runner.Prepare), as a start inside
	// the runner was before. stopEarly says the stop came before that.
	startCommitted, stopEarly bool
	// startRecorded, set while a start marked in the start log
	// (markstart.go) has its running record committing, closes when that
	// commit is over: the process record is written after it.
	startRecorded <-chan struct{}
	// swept, when not nil, closes once what the job's last run left is
	// swept and its leader reaped (runner.Result.Settled): its end is
	// shown only then.
	swept   <-chan struct{}
	pidKick chan struct{} // capacity 1: the process record changed
	pidDone chan struct{} // closed when the process-record writer has ended
}

// newJob is a job in memory for rec, whose command's key is taken from
// its digest (rec may be brief).
func newJob(rec store.Job, durable bool) *job {
	return newKeyedJob(rec, keyOfRec(&rec), durable)
}

// newKeyedJob is newJob with the command's key already computed, so
// Submit can hash a large command before it takes the lock.
func newKeyedJob(rec store.Job, key cmdKey, durable bool) *job {
	return &job{rec: rec, key: key, durable: durable, stop: make(chan struct{}), changed: make(chan struct{})}
}

// repeats is how many iterations the job runs; a record stored before
// Repeat was always set says 0, which means 1.
func (j *job) repeats() int { return max(j.rec.Repeat, 1) }

// notify wakes everyone waiting for this job to change.
func (j *job) notify() {
	close(j.changed)
	j.changed = make(chan struct{})
}

// stopFor closes the stop channel once, remembering the first reason. A
// kill is remembered whatever came first.
func (j *job) stopFor(r stopReason) {
	if r == stopKill {
		j.killed = true
	}
	if j.reason != stopNone {
		return
	}
	j.reason = r
	j.stopEarly = !j.startCommitted
	close(j.stop)
}

// endReason is the stop reason its record shows: a kill request wins.
func (j *job) endReason() stopReason {
	if j.killed {
		return stopKill
	}
	return j.reason
}

// JobInfo is a job record as the API shows it, with its place in the queue.
type JobInfo struct {
	store.Job
	// Position is 1 for the next job to start on its card, 2 for the one
	// after it, and so on; 0 unless the job is queued.
	Position int
	// EstimatedWait is the estimated time until the job starts (queued) or
	// ends (running); see estimate.go.
	EstimatedWait time.Duration
	// EstimatedRun is the expected run time of the whole job (every
	// repeat) while it is queued or running; 0 once done.
	EstimatedRun time.Duration
	// EstimateKnown says EstimatedRun comes from this command's own runs
	// on the card; otherwise it is the card's median (or the default), a
	// guess the CLI shows as "unknown".
	EstimateKnown bool
	// Overdue is how far a running job's current iteration is past its
	// estimate; 0 when it is not.
	Overdue time.Duration
	// Held is set while the job's final record is kept in memory because
	// the store is failing.
	Held bool
	// WaitsFor lists the jobs of After a queued job still waits for
	// (those that have not ended), so people see why it does not start.
	WaitsFor []string
}

// finishRecord turns a runner result into the job's done record. A job
// whose process never started keeps no start time. A killed job never
// records exit 0 or its own status: -N when a signal N ended it, else -1.
func finishRecord(rec store.Job, res runner.Result, reason stopReason, ls runner.LogState, now time.Time, why ...string) store.Job {
	crossKill := ""
	if len(why) > 0 {
		crossKill = why[0]
	}
	rec.State = store.StateDone
	rec.FinishedAt = now
	rec.Iterations = res.Iterations
	if res.Iterations == 0 {
		rec.StartedAt = time.Time{}
		rec.PGID, rec.LeaderStart = 0, 0
	}
	code := res.ExitCode
	switch {
	case res.Stopped && res.Err != nil && res.Iterations == 0 && reason != stopKill:
		// Its start was stuck (a working directory that does not answer)
		// when a service stop or a reset came: it failed to start; it is
		// not queued again to get stuck once more.
		why := "the service stop"
		if reason == stopReset {
			why = fmt.Sprintf("a reset of card %d", rec.Card())
		}
		code, rec.Outcome = -1, store.OutcomeFailure
		rec.Error = fmt.Sprintf("%v; stopped by %s", res.Err, why)
	case res.Stopped && reason == stopService:
		code, rec.Outcome, rec.Error = -1, store.OutcomeInterrupted, "interrupted by service stop"
	case res.Stopped && reason == stopReset:
		// -1 like every interruption from outside the job (a service stop
		// or restart): the job did not fail by itself, whatever signal
		// ended it. Kill by request keeps the signal's -N.
		code, rec.Outcome = -1, store.OutcomeInterrupted
		rec.Error = fmt.Sprintf("interrupted by a reset of card %d", rec.Card())
	case res.Stopped && reason == stopKill && crossKill != "":
		code, rec.Outcome, rec.Error = -1, store.OutcomeKilled, crossKill
	case res.Stopped && reason == stopKill:
		rec.Outcome, rec.Error = store.OutcomeKilled, "killed by request"
		switch {
		case res.Iterations == 0:
			code, rec.Error = -1, "killed by request before it started"
		case code > 0:
			rec.Error = fmt.Sprintf("killed by request; it exited with status %d after SIGINT", code)
			code = -1
		case code == 0:
			code = -1
		}
	case res.Hung:
		code, rec.Outcome, rec.Error = HungExitCode, store.OutcomeHung, hungError(&rec, res)
	case res.Err != nil:
		code, rec.Outcome, rec.Error = -1, store.OutcomeFailure, res.Err.Error()
	case res.TimedOut:
		rec.Outcome = store.OutcomeTimeout
		// The timeout covers the whole job, every iteration together.
		switch {
		case res.Iterations == 0:
			rec.Error = fmt.Sprintf("timed out after %ds before its program started; it was killed", rec.Timeout)
		case rec.Repeat > 1:
			rec.Error = fmt.Sprintf("timed out after %ds, in iteration %d of %d (the timeout covers every iteration together); it was killed",
				rec.Timeout, res.Iterations, rec.Repeat)
		default:
			rec.Error = fmt.Sprintf("timed out after %ds; it was killed", rec.Timeout)
		}
	case code == 0:
		rec.Outcome = store.OutcomeSuccess
	default:
		rec.Outcome = store.OutcomeFailure
		if code < 0 {
			rec.Error = fmt.Sprintf("iteration %d was killed by signal %d", res.Iterations, -code)
		} else if rec.Repeat > 1 {
			rec.Error = fmt.Sprintf("iteration %d of %d exited with status %d", res.Iterations, rec.Repeat, code)
		}
	}
	if a := res.Abandoned; a != nil {
		// The card moved on without it: say so, and why, in the record.
		rec.Error = strings.TrimPrefix(rec.Error+"; "+a.Reason, "; ")
	}
	rec.ExitCode = &code
	rec.KillRung = signalName(res.KillSignal)
	rec.LogBytes, rec.LogTruncated, rec.DroppedLogBytes = ls.Size, ls.Truncated, ls.Dropped
	rec.LogCutAt, rec.LogCutBytes = ls.Layout.CutAt, ls.Layout.Cut
	if ls.Err != nil {
		rec.LogError = ls.Err.Error()
	}
	return rec
}
