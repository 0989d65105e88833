package scheduler

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ttkit/ttkit/queued/store"
)

// retention deletes finished jobs past TT_DEVICE_RETENTION_DAYS or
// beyond TT_DEVICE_MAX_COMPLETED_JOBS, with their output, and runs the
// output budget's rounds; both in one goroutine, so they never race. Its
// fields are shown in status, guarded by core.mu.
type retention struct {
	*core
	lastRun time.Time
	deleted int    // jobs deleted by the last run
	warning string // the last run's error; retention errors never stop the queue
}

// loop prunes at start (also sweeping output files that no record
// names) and then every RetentionInterval. It also keeps the output files
// within their budget: at start, every RetentionInterval, and as jobs end.
func (s *retention) loop() {
	defer s.loops.Done()
	s.prune(true)
	s.budget.count()
	s.budget.enforce()
	t := time.NewTicker(s.opt.RetentionInterval)
	defer t.Stop()
	kicked := s.budget.kicked()
	for {
		select {
		case <-t.C:
			s.prune(false)
			s.budget.enforce()
		case <-kicked:
			s.budget.enforce()
		case <-s.quit:
			return
		}
	}
}

// prune deletes finished jobs older than RetentionDays, beyond the newest
// MaxCompleted, or beyond their owner's newest MaxCompletedPerUser, and
// their output files.
func (s *retention) prune(sweep bool) {
	s.mu.Lock()
	failing := s.persist.err != nil
	s.mu.Unlock()
	if failing {
		return // writes are failing; the retry loop owns the store for now
	}
	now := s.opt.Now()
	cutoff := now.Add(-time.Duration(s.opt.RetentionDays) * 24 * time.Hour)
	ids, err := s.st.Prune(store.Retention{Cutoff: cutoff, Keep: s.opt.MaxCompleted, KeepPerOwner: s.opt.MaxCompletedPerUser, Exempt: s.opt.Exempt})
	var problems []string
	if err != nil {
		problems = append(problems, err.Error())
	}
	for _, id := range ids {
		if err := os.Remove(s.outputPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			problems = append(problems, fmt.Sprintf("removing output of %s: %v", id, err))
		}
	}
	s.budget.forget(ids)
	if sweep {
		problems = append(problems, s.sweepOrphans()...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastRun = now
	s.deleted = len(ids)
	s.warning = ""
	if len(problems) > 0 {
		if len(problems) > 3 {
			problems = append(problems[:3], fmt.Sprintf("and %d more", len(problems)-3))
		}
		s.warning = "retention: " + strings.Join(problems, "; ")
		s.log.Warn("retention problems", "warning", s.warning)
	}
}

// sweepOrphans removes output files whose job record is gone (a crash
// between deleting a record and its file).
func (s *retention) sweepOrphans() []string {
	entries, err := s.settledOutputs()
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	for _, e := range entries {
		id := e.id
		if _, err := s.st.Brief(id); !errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err := os.Remove(s.outputPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			problems = append(problems, fmt.Sprintf("removing orphan output %s: %v", e.Name(), err))
			continue
		}
		s.budget.forget([]string{id})
	}
	return problems
}
