package scheduler

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/ttkit/ttkit/queued/store"
)

// persistState tracks a persistence failure, guarded by Scheduler.mu.
type persistState struct {
	err      error     // the last write error; nil while writes succeed
	since    time.Time // when the failure began
	held     []*job    // finished jobs whose final records wait to be written
	attempts int       // recovery attempts since the failure began
}

// failLocked records a failed write: dispatch stops on every card and
// submissions are refused until the retry loop recovers.
func (s *Scheduler) failLocked(err error) {
	s.met.persistFailed()
	if s.persist.err == nil {
		s.persist.since = s.opt.Now()
		s.persist.attempts = 0
		s.log.Error("persistence failing: dispatch stopped on every card", "err", err)
	}
	s.persist.err = err
	s.changes.bump()
	select {
	case s.failed <- struct{}{}:
	default:
	}
}

// holdLocked keeps a finished job's final record in memory until the store
// takes writes again; the job is shown as done meanwhile. A record that is
// not final (a job put back in its queue because it never started) is
// kept for writing the same way, but the job stays active.
func (s *Scheduler) holdLocked(j *job, rec store.Job) {
	if rec.State != store.StateDone {
		if !slices.Contains(s.persist.held, j) {
			s.persist.held = append(s.persist.held, j)
		}
		return
	}
	j.rec = rec
	if !j.held {
		j.held = true
		if !slices.Contains(s.persist.held, j) {
			s.persist.held = append(s.persist.held, j)
		}
	}
	s.notify(j)
}

// retryLoop waits for a failure, then tries to recover with exponential
// backoff between RetryMin and RetryMax until it succeeds.
func (s *Scheduler) retryLoop() {
	defer s.loops.Done()
	for {
		select {
		case <-s.failed:
		case <-s.quit:
			return
		}
		delay := s.opt.RetryMin
		for !s.tryRecover() {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-s.quit:
				t.Stop()
				return
			}
			delay = min(2*delay, s.opt.RetryMax)
		}
	}
}

// tryRecover probes the store, writes the held records and, if both
// succeed and nothing new failed meanwhile, resumes dispatch.
func (s *Scheduler) tryRecover() bool {
	s.mu.Lock()
	if s.persist.err == nil {
		s.mu.Unlock()
		return true
	}
	s.persist.attempts++
	s.mu.Unlock()

	if err := s.st.Probe(); err != nil {
		s.mu.Lock()
		s.persist.err = err
		s.mu.Unlock()
		s.spillHeld()
		return false
	}
	if !s.flushHeld() {
		s.spillHeld()
		return false
	}
	if !s.clearSpill() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cards, _ := s.dirtyCardsLocked(); len(s.persist.held) > 0 || len(cards) > 0 {
		return false // more were held while we wrote; go round again
	}
	s.log.Info("persistence recovered: dispatch resumed", "after", s.opt.Now().Sub(s.persist.since).Round(time.Millisecond))
	s.persist.err = nil
	s.changes.bump()
	for _, id := range s.order {
		s.cards[id].wakeup()
	}
	// A failure that raced with this recovery left a token in s.failed;
	// drain it so the loop does not start a pointless round.
	select {
	case <-s.failed:
	default:
	}
	return true
}

// flushHeld writes the records held so far, and the card records changed
// since their last write, in one transaction and forgets the jobs written.
// It reports whether everything held was written.
func (s *Scheduler) flushHeld() bool {
	s.mu.Lock()
	held := append([]*job(nil), s.persist.held...)
	recs := make([]store.Job, len(held))
	for i, j := range held {
		recs[i] = j.rec
	}
	cards, revs := s.dirtyCardsLocked()
	s.mu.Unlock()
	if len(held) == 0 && len(cards) == 0 {
		return true
	}
	if err := s.st.Commit(cards, recs...); err != nil {
		s.mu.Lock()
		s.persist.err = err
		s.mu.Unlock()
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.savedLocked(cards, revs)
	written := map[*job]bool{}
	for i, j := range held {
		written[j] = true
		if recs[i].State == store.StateDone {
			j.held = false
			delete(s.jobs, j.rec.ID)
		}
	}
	rest := s.persist.held[:0]
	for _, j := range s.persist.held {
		if !written[j] {
			rest = append(rest, j)
		}
	}
	s.persist.held = rest
	return true
}

// heldLocked snapshots what a failing store has not taken: the held job
// records and the card records changed since their last write.
func (s *Scheduler) heldLocked() ([]store.Card, []store.Job) {
	cards, _ := s.dirtyCardsLocked()
	jobs := make([]store.Job, len(s.persist.held))
	for i, j := range s.persist.held {
		jobs[i] = j.rec
	}
	return cards, jobs
}

// spillHeld keeps the held records in the store's reserve (store.SpillFile),
// so a stop or a crash before the store recovers does not undo what was
// answered from them; the next start writes them in. It reports success.
func (s *Scheduler) spillHeld() bool {
	s.spillMu.Lock()
	defer s.spillMu.Unlock()
	s.mu.Lock()
	cards, jobs := s.heldLocked()
	s.mu.Unlock()
	if len(cards) == 0 && len(jobs) == 0 {
		return true
	}
	if err := s.st.Spill(cards, jobs...); err != nil {
		s.log.Error("cannot keep the held records in the spill reserve", "err", err)
		return false
	}
	if !s.spilled {
		s.log.Warn("held records kept in the spill reserve until the store takes writes", "jobs", len(jobs), "cards", len(cards))
	}
	s.spilled = true
	return true
}

// clearSpill empties the reserve once its records are in the store, before
// dispatch resumes: nothing newer can reach the store while it is not
// empty. It reports success.
func (s *Scheduler) clearSpill() bool {
	s.spillMu.Lock()
	defer s.spillMu.Unlock()
	if !s.spilled {
		return true
	}
	if err := s.st.Spill(nil); err != nil {
		s.mu.Lock()
		s.persist.err = err
		s.mu.Unlock()
		return false
	}
	s.spilled = false
	return true
}

// settleAtStop makes a last attempt to write the held records; when the
// store still fails it spills them, and when even that fails it logs each
// record in full, the last place an operator can find what was answered.
func (s *Scheduler) settleAtStop() {
	if s.flushHeld() {
		s.clearSpill()
		return
	}
	if s.spillHeld() {
		s.log.Warn("stopped with records the store could not take; the next start writes them in from the spill reserve")
		return
	}
	s.mu.Lock()
	cards, jobs := s.heldLocked()
	s.mu.Unlock()
	for _, c := range cards {
		b, _ := json.Marshal(c)
		s.log.Error("card record not written; it is lost at restart", "record", string(b))
	}
	for _, j := range jobs {
		b, _ := json.Marshal(j)
		s.log.Error("job record not written; it is lost at restart", "record", string(b))
	}
}
