package server

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
)

// slotWait is how long a request waits for a free handler before 503.
const slotWait = 30 * time.Second

// slots are the handler slots (TT_DEVICE_HTTP_WORKERS): a request works
// only while it holds one, gives it back when its answer starts, and a
// long-poll gives it back while it waits (wait). The counters are what
// GET /status shows of them.
type slots struct {
	ch      chan struct{}
	busy    atomic.Int64 // slots held
	waiting atomic.Int64 // requests waiting for a slot
	polling atomic.Int64 // long-polls waiting without a slot
	closing chan struct{}
	closed  atomic.Bool
}

func newSlots(workers int) *slots {
	return &slots{ch: make(chan struct{}, workers), closing: make(chan struct{})}
}

// claim is a new request's claim on a slot, not yet held.
func (ss *slots) claim() *slot { return &slot{ss: ss} }

// close makes waiting long-polls answer at once.
func (ss *slots) close() {
	if ss.closed.CompareAndSwap(false, true) {
		close(ss.closing)
	}
}

// wait gives the request's handler slot back, waits for one of the
// channels, the deadline, the client leaving or the server closing, and
// takes a slot again. It reports whether the handler should look again
// (false: answer now with what it has, or give up if the slot could not
// be had).
func (ss *slots) wait(r *http.Request, deadline time.Time, a, b <-chan struct{}) (again bool, err error) {
	d := time.Until(deadline)
	if d <= 0 {
		return false, nil
	}
	sl := slotOf(r)
	sl.release()
	ss.polling.Add(1)
	defer ss.polling.Add(-1)
	t := time.NewTimer(d)
	defer t.Stop()
	again = true
	select {
	case <-a:
	case <-b:
	case <-t.C:
	case <-ss.closing:
		again = false
	case <-r.Context().Done():
		again = false
	}
	if err := sl.acquire(r.Context()); err != nil {
		return false, err
	}
	return again, nil
}

// slot is a request's claim on one of the handler slots.
type slot struct {
	ss   *slots
	held bool
}

type slotKey struct{}

// slotOf is the claim of a request that reached its handler.
func slotOf(r *http.Request) *slot {
	sl, _ := r.Context().Value(slotKey{}).(*slot)
	return sl
}

// acquire takes a slot, waiting up to slotWait for one.
func (sl *slot) acquire(ctx context.Context) error {
	if sl.held {
		return nil
	}
	ss := sl.ss
	select {
	case ss.ch <- struct{}{}:
	default:
		ss.waiting.Add(1)
		t := time.NewTimer(slotWait)
		defer t.Stop()
		select {
		case ss.ch <- struct{}{}:
			ss.waiting.Add(-1)
		case <-t.C:
			ss.waiting.Add(-1)
			return fmt.Errorf("server busy: all %d handlers (TT_DEVICE_HTTP_WORKERS) stayed busy for %s", cap(ss.ch), slotWait)
		case <-ctx.Done():
			ss.waiting.Add(-1)
			return ctx.Err()
		}
	}
	sl.held = true
	ss.busy.Add(1)
	return nil
}

// release gives the slot back, if held.
func (sl *slot) release() {
	if !sl.held {
		return
	}
	sl.held = false
	sl.ss.busy.Add(-1)
	<-sl.ss.ch
}
