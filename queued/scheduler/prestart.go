package scheduler

import (
	"context"
	"runtime/trace"

	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
)

// A job's running record is durable before its program runs (a crash
// must never run it twice), and that commit is the longest wait of a
// dispatch. What the start needs besides (its output file, its whole
// record, how it runs, and the exec helper with every step up to the
// execve: runner.Prepare) is made while the commit is in flight; the
// program itself waits for the commit (issue 41). Each step is a region
// of Go's execution trace (`go test -trace`), so a trace shows where one
// dispatch's time goes (docs/reliability.md).

// starter commits a job's start and prepares it meanwhile.
type starter struct{ *core }

// launchPrep is a job's start, prepared while its running record
// commits.
type launchPrep struct {
	log    *runner.Log
	spec   runner.Spec
	err    error // the spec could not be made: the job fails to start
	helper *runner.Prepared
}

// commitAndPrepare commits recs (and cards) and, meanwhile, prepares the
// start of next (rec, its record as taken) on p, when it is a job; it
// returns the preparation (nil for a reset or a hold) and the commit's
// error.
func (s starter) commitAndPrepare(p *preparer, next *job, rec *store.Job, cards []store.Card, recs []store.Job) (*launchPrep, error) {
	if next == nil || rec.Kind != store.KindJob {
		return nil, s.st.Commit(cards, recs...)
	}
	return p.prepareBeside(rec, "dispatch: commit the start", func() error { return s.st.Commit(cards, recs...) })
}

// preparer prepares a card's starts on a goroutine that lives as long
// as the card's worker, not one started for each: a preparation goes
// deep (decoding the spec, the user database), and a goroutine's stack
// starts small and is copied each time it doubles: with a goroutine
// started for each start, the copies were about 7% of queued's CPU in a
// drain (issue 41). The kept goroutine's stack stays grown. Its worker
// asks for one preparation at a time and takes it before the next, so
// one channel carries every answer.
type preparer struct {
	reqs chan store.Job   // the record, as taken, of the start to prepare
	out  chan *launchPrep // its preparation
}

// startPreparer starts a card's preparer; its worker stops it.
func (s starter) startPreparer() *preparer {
	p := &preparer{reqs: make(chan store.Job), out: make(chan *launchPrep, 1)}
	go func() {
		for rec := range p.reqs {
			region := trace.StartRegion(context.Background(), "dispatch: prepare the start")
			p.out <- s.prepare(rec)
			region.End()
		}
	}()
	return p
}

// stop ends the preparer's goroutine once it is idle.
func (p *preparer) stop() { close(p.reqs) }

// prepareBeside prepares rec's start while write makes it durable (a
// commit, or a mark in the start log), and returns both outcomes. The
// write runs here and the preparation beside it: the preparer waits for
// another thread to wake (a tenth of a millisecond on our machines), and
// the write is the longer of the two, so it begins at once. region names
// the write in an execution trace.
func (p *preparer) prepareBeside(rec *store.Job, region string, write func() error) (*launchPrep, error) {
	p.reqs <- *rec
	r := trace.StartRegion(context.Background(), region)
	err := write()
	r.End()
	defer trace.StartRegion(context.Background(), "dispatch: wait for the preparation").End()
	return <-p.out, err
}

// prepare makes a job's start: output file, spec and prepared helper.
func (s starter) prepare(rec store.Job) *launchPrep {
	p := &launchPrep{log: s.jobLog(&rec)}
	// fair-share: memory holds the record brief; the job runs its whole
	// command and environment, read from the store here (core.wholeRecord).
	whole, wholeErr := s.wholeRecord(rec)
	// The user database is read outside the lock: it may be slow (NSS).
	p.spec, p.err = s.launch.spec(&whole)
	if wholeErr != nil {
		p.err = wholeErr
	}
	if p.err == nil {
		p.helper = runner.Prepare(p.spec, p.log)
	}
	return p
}

// jobLog opens the output of rec's run: a new file, or, for a reset
// retried after a restart or a job run again after its card ended an
// attempt, the earlier attempt's output with the new one below.
func (s starter) jobLog(rec *store.Job) *runner.Log {
	if rec.Kind == store.KindReset || rec.AttemptNo() > 1 {
		return runner.ResumeLog(s.outputPath(rec.ID), s.opt.MaxLogBytes)
	}
	return runner.NewLog(s.outputPath(rec.ID), s.opt.MaxLogBytes)
}

// cancel ends a preparation whose job does not start now: its helper
// never runs the program.
func (p *launchPrep) cancel() {
	if p == nil {
		return
	}
	p.helper.Cancel()
	p.log.Close()
}
