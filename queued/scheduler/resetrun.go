package scheduler

import (
	"fmt"
	"time"

	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
)

// resetRunner runs a reset job's recovery ladder (ladder.go) and settles
// what it decides: a healthy card, or a dead one whose
// queued jobs fail with it.
type resetRunner struct{ *core }

// finishLocked settles a reset job that ran on card c. Recovered: the
// card is healthy (revived if it was dead). Failed: the card is dead and
// its queued jobs fail with it (exit -1). Stopped by a service stop: the
// reset goes back to queued, so the next start on the same boot retries
// it. Every outcome but the stop counts as a completed reset (the epoch
// job-based resets compare against).
func (s resetRunner) finishLocked(c *card, j *job, r recovery, ls runner.LogState, now time.Time) ([]*job, []store.Job) {
	rec := j.rec
	rec.LogBytes, rec.LogTruncated, rec.DroppedLogBytes = ls.Size, ls.Truncated, ls.Dropped
	rec.LogCutAt, rec.LogCutBytes = ls.Layout.CutAt, ls.Layout.Cut
	if ls.Err != nil {
		rec.LogError = ls.Err.Error()
	}
	c.reset = nil
	c.heldBy = ""
	if !r.stopped && !r.verified {
		s.fit.resetEndedLocked(c)
	}
	if r.stopped {
		rec.State, rec.StartedAt, rec.Iterations, rec.PGID, rec.LeaderStart = store.StateQueued, time.Time{}, 0, 0, 0
		c.state = c.idleState()
		return []*job{j}, []store.Job{rec}
	}
	rec.State, rec.FinishedAt = store.StateDone, now
	c.resetEpoch++
	c.changedLocked()
	if r.ok {
		code := 0
		rec.ExitCode, rec.Outcome = &code, store.OutcomeSuccess
		c.last = resetResult{id: rec.ID, result: ResultOK, detail: r.detail, at: now}
		if c.dead != nil {
			s.log.Info("card revived: the health check passed", "card", c.id, "reset", rec.ID)
		}
		c.dead = nil
		c.state = Healthy
		c.learn(j.key, &rec)
		s.met.resetEnded(c.id, true)
		return []*job{j}, []store.Job{rec}
	}
	code := r.code
	if code == 0 {
		code = -1 // a panic; the record needs a failing code
	}
	rec.ExitCode, rec.Outcome = &code, store.OutcomeFailure
	rec.Error = fmt.Sprintf("card %d is dead: %s", c.id, r.detail)
	c.last = resetResult{id: rec.ID, result: ResultFailed, detail: r.detail, at: now}
	if c.dead == nil {
		c.dead = &deadInfo{reason: "reset " + rec.ID + " failed: " + r.detail, since: now, bootID: s.bootID}
	} else {
		c.dead.reason = "reset " + rec.ID + " failed: " + r.detail
	}
	c.state = Dead
	c.learn(j.key, &rec)
	s.met.resetEnded(c.id, false)
	s.log.Error("card is dead: recovery failed; its queued jobs fail, other cards continue", "card", c.id, "reset", rec.ID, "detail", r.detail)
	done, recs := s.drainLocked(c, now)
	return append([]*job{j}, done...), append([]store.Job{rec}, recs...)
}

// drainLocked fails every durable queued job of a dead card (exit -1,
// "card N is dead") and returns them with their done records, to be
// committed with the card record. A job whose insert is still committing
// is failed by Submit once it is durable.
func (s resetRunner) drainLocked(c *card, now time.Time) ([]*job, []store.Job) {
	var done []*job
	var recs []store.Job
	keep := c.queue[:0]
	for _, q := range c.queue {
		if !q.durable || q.rec.Kind == store.KindReset {
			keep = append(keep, q)
			continue
		}
		c.est.dequeue(q.key, q.repeats())
		if q.spans() {
			// It fails on every card: out of the others' queues too.
			for _, o := range s.cardsOf(q) {
				if o != c && o.remove(q) {
					o.wakeup()
				}
			}
		}
		s.queued--
		q.ending = true
		done = append(done, q)
		rec := deadRecord(q.rec, c.id, now)
		s.met.jobEnded(&rec)
		recs = append(recs, rec)
	}
	clear(c.queue[len(keep):])
	c.queue = keep
	return done, recs
}

// deadRecord is the done record of a queued job failed because its card
// is dead.
func deadRecord(rec store.Job, card int, now time.Time) store.Job {
	code := -1
	rec.State, rec.FinishedAt, rec.ExitCode = store.StateDone, now, &code
	rec.Outcome = store.OutcomeCardDead
	rec.Error = fmt.Sprintf("card %d is dead", card)
	return rec
}
