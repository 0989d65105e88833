package scheduler

import (
	"fmt"
	"os"
	"time"

	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
)

// restart rebuilds the scheduler's state from the store before any worker
// runs: the cards' records, the estimates' history, the queues, and the
// ends of the jobs a stop or a crash interrupted.
type restart struct{ *core }

// run restores the cards, seeds the estimates and recovers the queues.
func (s restart) run() error {
	if err := s.loadCards(); err != nil {
		return err
	}
	recent, err := s.st.Recent(SeedRecords)
	if err != nil {
		s.log.Warn("estimates start without history: cannot read finished jobs", "err", err)
	} else {
		s.seed(recent)
	}
	return s.recover(recent)
}

// leftoverTimeout bounds how long recovery keeps killing leftover processes.
const leftoverTimeout = 10 * time.Second

// recover rebuilds the queues from the store before any worker runs:
// queued jobs return to their card in FIFO order; running jobs were
// interrupted by the restart, their leftover processes are killed and they
// are recorded done with exit -1. A reset (queued, or running when the
// service stopped or crashed) goes back to the head of its card's queue if
// it was requested on this boot, and ends as interrupted otherwise. Queued
// jobs of a card that is still dead fail. If those records cannot be
// written the scheduler starts in the persistence-failure state with them
// held.
func (s restart) recover(recent []store.Job) error {
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
	leftovers := s.unsettled(recent)
	var resets []*job // resets to retry, in FIFO order
	var holds []*job  // holds that held their cards, in FIFO order
	var rewritten []store.Job
	started, err := s.markedStarts()
	if err != nil {
		return fmt.Errorf("recovering queues: %w", err)
	}
	for _, rec := range active {
		if a, ok := started[rec.ID]; ok && a == rec.AttemptNo() && rec.State == store.StateQueued && rec.Kind == store.KindJob {
			// Its start was made durable in the start log and its running
			// record was not yet (markstart.go): it started.
			rec.State = store.StateRunning
		}
		c := s.cards[rec.Card()]
		missing, dead := -1, (*card)(nil)
		for _, id := range rec.Cards() {
			switch cd := s.cards[id]; {
			case cd == nil && missing < 0:
				missing = id
			case cd != nil && cd.dead != nil && dead == nil:
				dead = cd
			}
		}
		if rec.State == store.StateRunning && rec.Kind != store.KindHold {
			leftovers = append(leftovers, runner.Leftover{JobID: rec.ID, PGID: rec.PGID, LeaderStart: rec.LeaderStart, UID: leftoverUID(&s.opt, &rec)})
		}
		switch {
		case rec.Kind == store.KindHold && !rec.ExpiresAt.IsZero() && !now.Before(rec.ExpiresAt):
			rec = holdRecord(rec, holdEnd{expired: true}, now)
		case rec.Kind == store.KindHold && rec.State == store.StateRunning && missing < 0 && dead == nil:
			// A hold survives a restart: it holds its cards again before
			// anything else runs on them. Queued in memory until its worker
			// takes it again (which records it active, its start kept).
			rec.State = store.StateQueued
			j := newJob(rec, true)
			holds = append(holds, j)
			s.jobs[rec.ID] = j
			s.queued++
			continue
		case rec.Kind == store.KindReset && c != nil && c.reset == nil && (rec.BootID == "" || rec.BootID == s.bootID):
			// A reset interrupted by a stop or a crash on this boot runs
			// again, before anything else on its card.
			if rec.State == store.StateRunning {
				rec.State, rec.StartedAt, rec.Iterations, rec.PGID, rec.LeaderStart = store.StateQueued, time.Time{}, 0, 0, 0
				rewritten = append(rewritten, rec)
			}
			j := newJob(rec, true)
			j.interrupt = true
			c.reset = j
			resets = append(resets, j)
			s.jobs[rec.ID] = j
			s.queued++
			continue
		case rec.Kind == store.KindReset:
			code := -1
			rec.State, rec.FinishedAt, rec.ExitCode = store.StateDone, now, &code
			rec.Outcome = store.OutcomeInterrupted
			switch {
			case c == nil:
				rec.Error = fmt.Sprintf("not retried: card %d is no longer configured (TT_DEVICE_IDS)", rec.Card())
			case c.reset != nil:
				rec.Error = fmt.Sprintf("not retried: reset %s of card %d runs instead", c.reset.rec.ID, c.id)
			default:
				rec.Error = "not retried: the host has rebooted since it was requested, which clears a card's state"
			}
		case rec.State == store.StateRunning:
			code := -1
			rec.State, rec.FinishedAt, rec.ExitCode = store.StateDone, now, &code
			rec.Outcome, rec.Error = store.OutcomeInterrupted, "interrupted by service restart"
			size, truncated, err := runner.InspectLog(s.outputPath(rec.ID), s.opt.MaxLogBytes)
			rec.LogBytes, rec.LogTruncated = size, truncated
			if err != nil {
				rec.LogError = err.Error()
			}
		case missing >= 0:
			code := -1
			rec.State, rec.FinishedAt, rec.ExitCode = store.StateDone, now, &code
			rec.Outcome = store.OutcomeFailure
			rec.Error = fmt.Sprintf("card %d is no longer configured (TT_DEVICE_IDS)", missing)
		case dead != nil:
			rec = deadRecord(rec, dead.id, now)
		default:
			j := newJob(rec, true)
			s.cardsOf(j).push(j)
			s.jobs[rec.ID] = j
			s.queued++
			continue
		}
		j := newJob(rec, true)
		s.jobs[rec.ID] = j
		ended = append(ended, j)
		endedRecs = append(endedRecs, rec)
	}
	for i := len(holds) - 1; i >= 0; i-- {
		for _, c := range s.cardsOf(holds[i]) {
			c.pushFront(holds[i])
		}
	}
	for i := len(resets) - 1; i >= 0; i-- {
		j := resets[i]
		s.cards[j.rec.Card()].pushFront(j)
	}
	if err := s.after.rewatch(); err != nil {
		return err
	}
	if len(holds) > 0 {
		s.log.Info("holds taken before the restart hold their cards again", "holds", len(holds))
	}
	if len(resets) > 0 {
		s.log.Info("retrying resets interrupted by the last stop", "resets", len(resets))
	}
	if len(leftovers) > 0 {
		killed, err := runner.KillLeftovers(s.opt.ProcRoot, leftovers, leftoverTimeout)
		if len(killed) > 0 {
			s.log.Warn("killed leftover processes of jobs the last stop interrupted or had not swept yet", "pids", killed)
		}
		if err != nil {
			s.warnings = append(s.warnings, fmt.Sprintf("killing leftover processes: %v", err))
			s.log.Error("killing leftover processes", "err", err)
		}
	}
	cards, revs := s.dirtyCardsLocked()
	if len(ended) == 0 && len(rewritten) == 0 && len(cards) == 0 {
		return nil
	}
	if err := s.st.Commit(cards, append(rewritten, endedRecs...)...); err != nil {
		// Held records and dirty cards are written when the store
		// recovers; a reset whose queued record was not rewritten still
		// reads "running" and is retried at the next start all the same.
		s.persist.failLocked(err)
		for i, j := range ended {
			s.persist.holdLocked(j, endedRecs[i])
		}
		return nil
	}
	s.savedLocked(cards, revs)
	for i, j := range ended {
		s.settleLocked(j, endedRecs[i])
	}
	s.log.Info("recovered queues", "queued", s.queued, "interrupted_or_failed", len(ended))
	return nil
}

// markedStarts is, by job id, the attempt each card's slot in the start
// log names: the last start made durable there.
func (s restart) markedStarts() (map[string]int, error) {
	started := map[string]int{}
	if s.opt.Starts == nil {
		return started, nil
	}
	marks, err := s.opt.Starts.Marks()
	for _, m := range marks {
		started[m.ID] = m.Attempt
	}
	return started, err
}

// leftoverUID is the user whose marked processes a leftover's sweep may
// take: the user the job ran as, or queued's own where the record names
// none (a system-mode job stored without an owner never ran as anyone
// else).
func leftoverUID(opt *Options, rec *store.Job) uint32 {
	if uid, ok := runUID(opt, rec); ok {
		return uid
	}
	return uint32(os.Geteuid())
}

// unsettled is what the last job to end on each card, in this boot, may
// have left: a job's end commits while its leftovers are still being
// swept (runner.Spec.SettleLater), so a crash in between leaves them
// alive with the job recorded done. recent is newest first. Processes
// are found as an interrupted job's are (runner.KillLeftovers), by its
// recorded group and leader and by its marker; after a clean stop there
// are none.
func (s restart) unsettled(recent []store.Job) []runner.Leftover {
	var out []runner.Leftover
	seen := map[int]bool{}
	for i := range recent {
		rec := &recent[i]
		if rec.Kind != store.KindJob || rec.BootID != s.bootID || rec.StartedAt.IsZero() {
			continue
		}
		last := false // the last to end on one of its cards
		for _, id := range rec.Cards() {
			last = last || !seen[id]
			seen[id] = true
		}
		if last {
			out = append(out, runner.Leftover{JobID: rec.ID, PGID: rec.PGID, LeaderStart: rec.LeaderStart, UID: leftoverUID(&s.opt, rec)})
		}
	}
	return out
}
