package scheduler

import "sync"

// changeFeed tells watchers that something a status page shows may have
// changed: a job was queued, started, finished, killed or put back, a
// reset was scheduled, or writes began to fail. It is a generation
// counter with a channel closed and replaced at every bump, so a
// long-poll waits on a channel instead of asking again and again. Its own
// lock keeps it usable with or without Scheduler.mu held.
type changeFeed struct {
	mu  sync.Mutex
	gen uint64
	ch  chan struct{}
}

// bump starts a new generation and wakes everyone waiting on the last.
func (f *changeFeed) bump() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen++
	if f.ch != nil {
		close(f.ch)
		f.ch = nil
	}
}

// current returns the generation and a channel that closes when it ends.
func (f *changeFeed) current() (uint64, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ch == nil {
		f.ch = make(chan struct{})
	}
	return f.gen, f.ch
}

// Changes returns the current change generation and a channel that
// closes at the next change of any job or of the store's health, for
// the live status page: read the generation, then Status, then wait on
// the channel; a change between the two closes it, so none is missed.
// Foreign holders are scanned, not notified: a watcher that shows them
// looks again after a while even without a change.
func (s *Scheduler) Changes() (gen uint64, changed <-chan struct{}) {
	return s.changes.current()
}

// notify wakes the waiters of job j and the watchers of Changes.
func (s *Scheduler) notify(j *job) {
	j.notify()
	s.changes.bump()
}
