package scheduler

// Dependencies between jobs (--after): a job queued after others keeps its
// FIFO place on its cards but is passed over while it waits, so the jobs
// behind it are not blocked by its dependency; it starts at its turn once
// every job it waits for has ended as its mode accepts, and ends with
// outcome "dependency", without running, once one cannot.

import (
	"errors"
	"fmt"
	"time"

	"github.com/ttkit/ttkit/queued/store"
)

// afterBook keeps the waits: which queued jobs wait for which job. Its
// fields are guarded by core.mu; a type of its own so that the parts of
// the scheduler, which embed the core, do not carry its methods.
type afterBook struct {
	core  *core
	index map[string][]*job // a job not ended yet -> the queued jobs waiting for it
}

// afterWait is what a queued job with dependencies still waits for.
type afterWait struct {
	pending map[string]bool // the jobs it waits for that have not ended
	unmet   string          // why its dependency can no longer be met; "" while it can
}

// waitsAfter reports whether j is passed over by dispatch for its
// dependencies: some have not ended, or one ended as its mode refuses
// (it is about to end itself).
func (j *job) waitsAfter() bool {
	return j.after != nil && (len(j.after.pending) > 0 || j.after.unmet != "")
}

// head is the job the card's worker looks at next: the first of its queue
// that does not wait for a dependency, nil when there is none. A reset
// and a hold never wait for one.
func (c *card) head() *job {
	for _, j := range c.queue {
		if !j.waitsAfter() {
			return j
		}
	}
	return nil
}

// afterRecords reads the records of the jobs ids names, outside the lock,
// for watchAfterLocked; a job with no record is left out (unknown).
func (b *afterBook) records(ids []string) (map[string]store.Job, error) {
	recs := map[string]store.Job{}
	for _, id := range ids {
		rec, err := b.core.st.Brief(id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			continue
		case err != nil:
			return nil, fmt.Errorf("reading job %s, a dependency: %w", id, err)
		}
		recs[id] = rec
	}
	return recs, nil
}

// afterWaitLocked is the wait of a job queued after rec.After: one still
// in memory and not done is waited for; one done (recs, or held in
// memory) is judged now; one neither in memory nor in recs is unknown,
// which only AfterAny accepts (its record was pruned, so it ended). It
// returns nil for a job queued after none, and the ids whose record in
// recs is stale (read active, ended since): the caller reads them again
// and asks once more.
func (b *afterBook) waitLocked(rec *store.Job, recs map[string]store.Job) (w *afterWait, stale []string) {
	if len(rec.After) == 0 {
		return nil, nil
	}
	w = &afterWait{pending: map[string]bool{}}
	for _, id := range rec.After {
		if d := b.core.jobs[id]; d != nil && d.rec.State != store.StateDone {
			w.pending[id] = true
			continue
		} else if d != nil {
			w.judge(rec.AfterMode, &d.rec)
			continue
		}
		dep, ok := recs[id]
		switch {
		case !ok && rec.AfterMode != store.AfterAny:
			if w.unmet == "" {
				w.unmet = fmt.Sprintf("dependency not met: job %s is unknown (its record is gone)", id)
			}
		case !ok:
		case dep.State != store.StateDone:
			stale = append(stale, id)
		default:
			w.judge(rec.AfterMode, &dep)
		}
	}
	if len(stale) > 0 {
		return nil, stale
	}
	return w, nil
}

// watchAfterLocked makes j wait as w says (nil: for nothing).
func (b *afterBook) watchLocked(j *job, w *afterWait) {
	if w == nil {
		return
	}
	j.after = w
	for id := range w.pending {
		b.index[id] = append(b.index[id], j)
	}
	b.markLocked(j)
}

// markLocked tells j's cards to look for it when its dependency can no
// longer be met.
func (b *afterBook) markLocked(j *job) {
	if j.after == nil || j.after.unmet == "" {
		return
	}
	for _, c := range b.core.cardsOf(j) {
		c.unmet = true
	}
}

// judge records that dependency rec has ended, and whether mode accepts
// how.
func (w *afterWait) judge(mode store.AfterMode, rec *store.Job) {
	delete(w.pending, rec.ID)
	if w.unmet == "" && !mode.Accepts(rec.Outcome) {
		w.unmet = fmt.Sprintf("dependency not met: job %s ended %s, and this job runs after it only %s",
			rec.ID, rec.Outcome, modeText(mode))
	}
}

// modeText is how an after mode reads in a message.
func modeText(m store.AfterMode) string {
	switch m {
	case store.AfterNotOK:
		return "if it does not succeed (--after-mode notok)"
	case store.AfterAny:
		return "once it ends (--after-mode any)"
	}
	return "if it succeeds (--after-mode ok)"
}

// afterSettledLocked tells the jobs waiting for rec, now durably done,
// that it has ended, and wakes their cards: one may start, or end.
// A job retried after an attempt is not done until its last attempt.
func (b *afterBook) settledLocked(rec *store.Job) {
	waiters := b.index[rec.ID]
	if len(waiters) == 0 {
		return
	}
	delete(b.index, rec.ID)
	for _, w := range waiters {
		if w.after == nil || w.rec.State != store.StateQueued {
			continue
		}
		w.after.judge(w.rec.AfterMode, rec)
		b.markLocked(w)
		b.core.cardsOf(w).wakeup()
		b.core.notify(w)
	}
	b.core.changes.bump()
}

// endUnmetLocked takes out of card c's queue every job whose dependency
// can no longer be met and returns them with their done records (outcome
// dependency, exit -1) for the worker to commit with its next write.
func (b *afterBook) endUnmetLocked(c *card) (ended []*job, recs []store.Job) {
	if !c.unmet || b.core.stopping || b.core.persist.err != nil {
		return nil, nil
	}
	c.unmet = false
	var unmet []*job
	for _, j := range c.queue {
		switch {
		case j.ending || j.after == nil || j.after.unmet == "":
		case !j.durable:
			c.unmet = true // its submission still commits: look again once it is durable
		default:
			unmet = append(unmet, j)
		}
	}
	now := b.core.opt.Now()
	for _, j := range unmet {
		b.core.cardsOf(j).remove(j)
		b.core.queued--
		j.ending = true
		rec := dependencyRecord(j.rec, j.after.unmet, now)
		b.core.met.jobEnded(&rec)
		ended, recs = append(ended, j), append(recs, rec)
	}
	return ended, recs
}

// dependencyRecord is the done record of a job that never ran because
// its dependency could not be met.
func dependencyRecord(rec store.Job, why string, now time.Time) store.Job {
	code := -1
	rec.State, rec.FinishedAt, rec.ExitCode = store.StateDone, now, &code
	rec.Outcome, rec.Error = store.OutcomeDependency, why
	return rec
}

// waitsFor lists the jobs j still waits for, for answers; nil when none.
func (j *job) waitsFor() []string {
	if j.after == nil || len(j.after.pending) == 0 {
		return nil
	}
	var ids []string
	for _, id := range j.rec.After {
		if j.after.pending[id] {
			ids = append(ids, id)
		}
	}
	return ids
}

// rewatchAfter sets up, at start, the waits of the queued jobs that were
// queued after others: the jobs they wait for are in memory (queued,
// running before the restart and ending now) or read from the store.
func (b *afterBook) rewatch() error {
	for _, j := range b.core.jobs {
		if j.rec.State != store.StateQueued || len(j.rec.After) == 0 {
			continue
		}
		var ids []string
		for _, id := range j.rec.After {
			if b.core.jobs[id] == nil {
				ids = append(ids, id)
			}
		}
		deps, err := b.records(ids)
		if err != nil {
			return fmt.Errorf("recovering queues: %w", err)
		}
		w, stale := b.waitLocked(&j.rec, deps)
		if len(stale) > 0 {
			// Stored active but not recovered: it cannot end any more.
			w = &afterWait{unmet: fmt.Sprintf("dependency not met: job %s was not recovered", stale[0])}
		}
		b.watchLocked(j, w)
	}
	return nil
}
