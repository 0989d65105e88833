package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// slotWait is how long a request waits for a free handler before 503.
const slotWait = 30 * time.Second

// slots are the handler slots (TT_DEVICE_HTTP_WORKERS): a request works
// only while it holds one, gives it back when its answer starts, and a
// long-poll gives it back while it waits (wait). They are shared fairly:
// a user outside the reserve (see who) holds at most perUser of them,
// and all such users together at most max less a reserve that root,
// queued's own user and the admins alone may take, so no user's requests
// can keep another's, or an admin's, waiting. Requests that must wait are
// served in their order of arrival, each as soon as a slot it may take
// is free. The counters are what GET /status shows of them.
type slots struct {
	max, perUser, reserve int
	// waitsPerUser bounds the long-polls one user outside the reserve has
	// waiting; a new one makes their oldest answer (see conns.startPoll).
	waitsPerUser int
	conns        *conns

	mu      sync.Mutex
	held    int            // slots held
	outside int            // of which by users outside the reserve
	byUser  map[uint32]int // of which by each such user
	queue   []*slotWaiter  // requests waiting, oldest first

	busy    atomic.Int64 // slots held
	freed   atomic.Int64 // when the last slot held was given back (Unix ns)
	waiting atomic.Int64 // requests waiting for a slot
	polling atomic.Int64 // long-polls waiting without a slot
	closing chan struct{}
	closed  atomic.Bool
}

// slotWaiter is a request waiting for a slot; ready is closed once it has
// been given one.
type slotWaiter struct {
	who   who
	ready chan struct{}
	given bool
}

func newSlots(workers, perUser, waitsPerUser int, cs *conns) *slots {
	return &slots{max: workers, perUser: perUser, reserve: reserveOf(workers, WorkersReserveShare), waitsPerUser: waitsPerUser,
		conns: cs, byUser: map[uint32]int{}, closing: make(chan struct{})}
}

// claim is a new request's claim on a slot, not yet held.
func (ss *slots) claim(w who) *slot { return &slot{ss: ss, who: w} }

// close makes waiting long-polls answer at once.
func (ss *slots) close() {
	if ss.closed.CompareAndSwap(false, true) {
		close(ss.closing)
	}
}

// mayTakeLocked reports whether w may take a slot now.
func (ss *slots) mayTakeLocked(w who) bool {
	if ss.held >= ss.max {
		return false
	}
	return w.reserved || (ss.byUser[w.uid] < ss.perUser && ss.outside < ss.max-ss.reserve)
}

// takeLocked gives w a slot.
func (ss *slots) takeLocked(w who) {
	ss.held++
	ss.busy.Add(1)
	if !w.reserved {
		ss.outside++
		ss.byUser[w.uid]++
	}
}

// giveBackLocked returns w's slot and hands free slots to the waiting
// requests that may take them, oldest first.
func (ss *slots) giveBackLocked(w who) {
	ss.held--
	ss.busy.Add(-1)
	ss.freed.Store(time.Now().UnixNano())
	if !w.reserved {
		ss.outside--
		if ss.byUser[w.uid]--; ss.byUser[w.uid] <= 0 {
			delete(ss.byUser, w.uid)
		}
	}
	rest := ss.queue[:0]
	for _, q := range ss.queue {
		if ss.mayTakeLocked(q.who) {
			ss.takeLocked(q.who)
			q.given = true
			close(q.ready)
			continue
		}
		rest = append(rest, q)
	}
	clear(ss.queue[len(rest):])
	ss.queue = rest
}

// restingFor is how long no handler has worked: 0 while one does. Long-
// polls waiting hold none, so a status page left open does not count.
func (ss *slots) restingFor() time.Duration {
	if ss.busy.Load() > 0 {
		return 0
	}
	return time.Since(time.Unix(0, ss.freed.Load()))
}

// wait gives the request's handler slot back, waits for one of the
// channels, the deadline, the client leaving, the server closing or its
// turn to make room for others (see conns.startPoll), and takes a slot
// again. It reports whether the handler should look again (false: answer
// now with what it has, or give up if the slot could not be had).
func (ss *slots) wait(r *http.Request, deadline time.Time, a, b <-chan struct{}) (again bool, err error) {
	d := time.Until(deadline)
	if d <= 0 {
		return false, nil
	}
	sl := slotOf(r)
	sl.release()
	ss.polling.Add(1)
	defer ss.polling.Add(-1)
	early, done := ss.conns.startPoll(r, ss.waitsPerUser)
	defer done()
	t := time.NewTimer(d)
	defer t.Stop()
	again = true
	select {
	case <-a:
	case <-b:
	case <-t.C:
	case <-early:
		again = false
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
	who  who
	held bool
}

type slotKey struct{}

// slotOf is the claim of a request that reached its handler.
func slotOf(r *http.Request) *slot {
	sl, _ := r.Context().Value(slotKey{}).(*slot)
	return sl
}

// acquire takes a slot, waiting up to slotWait for one its user may take.
func (sl *slot) acquire(ctx context.Context) error {
	if sl.held {
		return nil
	}
	ss := sl.ss
	ss.mu.Lock()
	if ss.mayTakeLocked(sl.who) {
		ss.takeLocked(sl.who)
		ss.mu.Unlock()
		sl.held = true
		return nil
	}
	q := &slotWaiter{who: sl.who, ready: make(chan struct{})}
	ss.queue = append(ss.queue, q)
	ss.mu.Unlock()
	ss.waiting.Add(1)
	defer ss.waiting.Add(-1)
	t := time.NewTimer(slotWait)
	defer t.Stop()
	var why error
	select {
	case <-q.ready:
		sl.held = true
		return nil
	case <-t.C:
		why = sl.busyErr()
	case <-ctx.Done():
		why = ctx.Err()
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if q.given { // given a slot just as it gave up: keep it
		sl.held = true
		return nil
	}
	for i, o := range ss.queue {
		if o == q {
			ss.queue = append(ss.queue[:i], ss.queue[i+1:]...)
			break
		}
	}
	return why
}

// busyErr says why a request found no slot in slotWait, and how to
// raise the bound it met.
func (sl *slot) busyErr() error {
	ss := sl.ss
	if !sl.who.reserved {
		return &BusyError{Bound: "TT_DEVICE_HTTP_WORKERS_PER_USER", Msg: fmt.Sprintf(
			"server busy: every handler uid %d may have (TT_DEVICE_HTTP_WORKERS_PER_USER=%d of TT_DEVICE_HTTP_WORKERS=%d) stayed busy for %s; "+
				"try again, or raise TT_DEVICE_HTTP_WORKERS_PER_USER (and TT_DEVICE_HTTP_WORKERS) in queued's environment",
			sl.who.uid, ss.perUser, ss.max, slotWait)}
	}
	return &BusyError{Bound: "TT_DEVICE_HTTP_WORKERS", Msg: fmt.Sprintf(
		"server busy: all %d handlers (TT_DEVICE_HTTP_WORKERS) stayed busy for %s; try again, or raise TT_DEVICE_HTTP_WORKERS in queued's environment",
		ss.max, slotWait)}
}

// release gives the slot back, if held.
func (sl *slot) release() {
	if !sl.held {
		return
	}
	sl.held = false
	sl.ss.mu.Lock()
	sl.ss.giveBackLocked(sl.who)
	sl.ss.mu.Unlock()
}
