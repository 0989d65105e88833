package scheduler

import (
	"fmt"
	"time"

	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
)

// leftoverTimeout bounds how long recovery keeps killing leftover processes.
const leftoverTimeout = 10 * time.Second

// recover rebuilds the queues from the store before any worker runs:
// queued jobs return to their card in FIFO order; running jobs were
// interrupted by the restart, their leftover processes are killed and they
// are recorded done with exit -1. If those records cannot be written the
// scheduler starts in the persistence-failure state with them held.
func (s *Scheduler) recover() error {
	active, err := s.st.Active()
	if err != nil {
		return fmt.Errorf("recovering queues: %w", err)
	}
	last, err := s.st.LastSeq()
	if err != nil {
		return fmt.Errorf("recovering queues: %w", err)
	}
	s.nextSeq = last + 1 // records are keyed by sequence: never reuse one
	now := s.opt.Now()
	var ended []*job
	var endedRecs []store.Job
	var leftovers []runner.Leftover
	for _, rec := range active {
		c := s.cards[rec.Card()]
		switch {
		case rec.State == store.StateRunning:
			leftovers = append(leftovers, runner.Leftover{JobID: rec.ID, PGID: rec.PGID, LeaderStart: rec.LeaderStart})
			code := -1
			rec.State, rec.FinishedAt, rec.ExitCode = store.StateDone, now, &code
			rec.Outcome, rec.Error = store.OutcomeInterrupted, "interrupted by service restart"
		case c == nil:
			code := -1
			rec.State, rec.FinishedAt, rec.ExitCode = store.StateDone, now, &code
			rec.Outcome = store.OutcomeFailure
			rec.Error = fmt.Sprintf("card %d is no longer configured (TT_DEVICE_IDS)", rec.Card())
		default:
			j := newJob(rec, true)
			c.push(j)
			s.jobs[rec.ID] = j
			s.queued++
			continue
		}
		j := newJob(rec, true)
		s.jobs[rec.ID] = j
		ended = append(ended, j)
		endedRecs = append(endedRecs, rec)
	}
	if len(leftovers) > 0 {
		killed, err := runner.KillLeftovers(s.opt.ProcRoot, leftovers, leftoverTimeout)
		if len(killed) > 0 {
			s.log.Warn("killed leftover processes of interrupted jobs", "pids", killed)
		}
		if err != nil {
			s.warnings = append(s.warnings, fmt.Sprintf("killing leftover processes: %v", err))
			s.log.Error("killing leftover processes", "err", err)
		}
	}
	if len(ended) == 0 {
		return nil
	}
	if err := s.st.Put(endedRecs...); err != nil {
		s.failLocked(err)
		for i, j := range ended {
			s.holdLocked(j, endedRecs[i])
		}
		return nil
	}
	for i, j := range ended {
		s.settleLocked(j, endedRecs[i])
	}
	s.log.Info("recovered queues", "queued", s.queued, "interrupted_or_failed", len(ended))
	return nil
}
