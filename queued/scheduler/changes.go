package scheduler

import "sync"

// changeFeed tells watchers that something a status page shows may have
// changed: a job was queued, started, finished, killed or put back, a
// reset was scheduled, or writes began to fail. It is a generation
// counter with a channel closed and replaced at every bump, so a
// long-poll waits on a channel instead of asking again and again. Its own
// lock keeps it usable with or without core.mu held.
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
