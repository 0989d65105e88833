package scheduler

import (
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/ttkit/ttkit/queued/store"
)

// persister owns a persistence failure: it stops dispatch, holds the
// records the store would not take (spilling them to the store's reserve),
// probes the store with backoff and resumes dispatch once everything held
// is written. Its fields but spillMu and spilled are guarded by core.mu.
type persister struct {
	*core
	err      error     // the last write error; nil while writes succeed
	since    time.Time // when the failure began
	held     []*job    // finished jobs whose final records wait to be written
	attempts int       // recovery attempts since the failure began

	failed  chan struct{} // poked when persistence fails, wakes the retry loop
	spillMu sync.Mutex    // orders spill writes; taken before core.mu
	spilled bool          // the spill reserve holds records; guarded by spillMu
}

// failLocked records a failed write: dispatch stops on every card and
// submissions are refused until the retry loop recovers.
func (p *persister) failLocked(err error) {
	p.met.persistFailed()
	if p.err == nil {
		p.since = p.opt.Now()
		p.attempts = 0
		p.log.Error("persistence failing: dispatch stopped on every card", "err", err)
	}
	p.err = err
	p.changes.bump()
	select {
	case p.failed <- struct{}{}:
	default:
	}
}

// holdLocked keeps a finished job's final record in memory until the store
// takes writes again; the job is shown as done meanwhile. A record that is
// not final (a job put back in its queue because it never started) is
// kept for writing the same way, but the job stays active.
func (p *persister) holdLocked(j *job, rec store.Job) {
	if rec.State != store.StateDone {
		if !slices.Contains(p.held, j) {
			p.held = append(p.held, j)
		}
		return
	}
	j.rec = rec
	if !j.held {
		j.held = true
		if !slices.Contains(p.held, j) {
			p.held = append(p.held, j)
		}
	}
	p.notify(j)
}

// loop waits for a failure, then tries to recover with exponential
// backoff between RetryMin and RetryMax until it succeeds.
func (p *persister) loop() {
	defer p.loops.Done()
	for {
		select {
		case <-p.failed:
		case <-p.quit:
			return
		}
		delay := p.opt.RetryMin
		for !p.tryRecover() {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-p.quit:
				t.Stop()
				return
			}
			delay = min(2*delay, p.opt.RetryMax)
		}
	}
}

// tryRecover probes the store, writes the held records and, if both
// succeed and nothing new failed meanwhile, resumes dispatch.
func (p *persister) tryRecover() bool {
	p.mu.Lock()
	if p.err == nil {
		p.mu.Unlock()
		return true
	}
	p.attempts++
	p.mu.Unlock()

	if err := p.st.Probe(); err != nil {
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		p.spillHeld()
		return false
	}
	if !p.flushHeld() {
		p.spillHeld()
		return false
	}
	if !p.clearSpill() {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if cards, _ := p.dirtyCardsLocked(); len(p.held) > 0 || len(cards) > 0 {
		return false // more were held while we wrote; go round again
	}
	p.log.Info("persistence recovered: dispatch resumed", "after", p.opt.Now().Sub(p.since).Round(time.Millisecond))
	p.err = nil
	p.changes.bump()
	p.wakeAllLocked()
	// A failure that raced with this recovery left a token in p.failed;
	// drain it so the loop does not start a pointless round.
	select {
	case <-p.failed:
	default:
	}
	return true
}

// flushHeld writes the records held so far, and the card records changed
// since their last write, in one transaction and forgets the jobs written.
// It reports whether everything held was written.
func (p *persister) flushHeld() bool {
	p.mu.Lock()
	held := append([]*job(nil), p.held...)
	recs := make([]store.Job, len(held))
	for i, j := range held {
		recs[i] = j.rec
	}
	cards, revs := p.dirtyCardsLocked()
	p.mu.Unlock()
	if len(held) == 0 && len(cards) == 0 {
		return true
	}
	if err := p.st.Commit(cards, recs...); err != nil {
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.savedLocked(cards, revs)
	written := map[*job]bool{}
	for i, j := range held {
		written[j] = true
		if recs[i].State == store.StateDone {
			j.held = false
			delete(p.jobs, j.rec.ID)
			p.after.settledLocked(&j.rec)
		}
	}
	rest := p.held[:0]
	for _, j := range p.held {
		if !written[j] {
			rest = append(rest, j)
		}
	}
	p.held = rest
	return true
}

// heldLocked snapshots what a failing store has not taken: the held job
// records and the card records changed since their last write.
func (p *persister) heldLocked() ([]store.Card, []store.Job) {
	cards, _ := p.dirtyCardsLocked()
	jobs := make([]store.Job, len(p.held))
	for i, j := range p.held {
		jobs[i] = j.rec
	}
	return cards, jobs
}

// spillHeld keeps the held records in the store's reserve (store.SpillFile),
// so a stop or a crash before the store recovers does not undo what was
// answered from them; the next start writes them in. It reports success.
func (p *persister) spillHeld() bool {
	p.spillMu.Lock()
	defer p.spillMu.Unlock()
	p.mu.Lock()
	cards, jobs := p.heldLocked()
	p.mu.Unlock()
	if len(cards) == 0 && len(jobs) == 0 {
		return true
	}
	if err := p.st.Spill(cards, jobs...); err != nil {
		p.log.Error("cannot keep the held records in the spill reserve", "err", err)
		return false
	}
	if !p.spilled {
		p.log.Warn("held records kept in the spill reserve until the store takes writes", "jobs", len(jobs), "cards", len(cards))
	}
	p.spilled = true
	return true
}

// clearSpill empties the reserve once its records are in the store, before
// dispatch resumes: nothing newer can reach the store while it is not
// empty. It reports success.
func (p *persister) clearSpill() bool {
	p.spillMu.Lock()
	defer p.spillMu.Unlock()
	if !p.spilled {
		return true
	}
	if err := p.st.Spill(nil); err != nil {
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		return false
	}
	p.spilled = false
	return true
}

// settleAtStop makes a last attempt to write the held records; when the
// store still fails it spills them, and when even that fails it logs each
// record in full, the last place an operator can find what was answered.
func (p *persister) settleAtStop() {
	if p.flushHeld() {
		p.clearSpill()
		return
	}
	if p.spillHeld() {
		p.log.Warn("stopped with records the store could not take; the next start writes them in from the spill reserve")
		return
	}
	p.mu.Lock()
	cards, jobs := p.heldLocked()
	p.mu.Unlock()
	for _, c := range cards {
		b, _ := json.Marshal(c)
		p.log.Error("card record not written; it is lost at restart", "record", string(b))
	}
	for _, j := range jobs {
		b, _ := json.Marshal(j)
		p.log.Error("job record not written; it is lost at restart", "record", string(b))
	}
}
