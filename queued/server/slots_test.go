package server

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSlots_SharedFairly: with 4 handlers, one user holds at most their
// share (1), users together at most 3 (one is kept for the reserve), root
// takes the reserved one, and requests that wait are served in order as
// soon as a slot they may take is free.
func TestSlots_SharedFairly(t *testing.T) {
	t.Parallel()
	ss := newSlots(4, 1, 2, newConns(8, 2, nil))
	if ss.reserve != 1 {
		t.Fatalf("reserve of 4 handlers: %d, want 1", ss.reserve)
	}
	alice, bob, carol, dave, root := who{uid: 1001}, who{uid: 1002}, who{uid: 1003}, who{uid: 1004}, who{uid: 0, reserved: true}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	take := func(w who) *slot {
		t.Helper()
		sl := ss.claim(w)
		if err := sl.acquire(ctx); err != nil {
			t.Fatal(err)
		}
		return sl
	}
	waits := func(w who) (*slot, chan error) {
		t.Helper()
		sl, done := ss.claim(w), make(chan error, 1)
		n := ss.waiting.Load()
		go func() { done <- sl.acquire(ctx) }()
		poll(t, "a request waiting for a handler", func() bool { return ss.waiting.Load() == n+1 })
		return sl, done
	}
	a := take(alice)
	_, alice2 := waits(alice) // past her share
	b := take(bob)
	take(carol)
	_, daves := waits(dave) // users hold 3 of 4: the last is the reserve's
	take(root)
	_, root2 := waits(root) // every handler is busy
	select {
	case err := <-alice2:
		t.Fatalf("alice got a second handler: %v", err)
	case err := <-daves:
		t.Fatalf("dave took the reserved handler: %v", err)
	case err := <-root2:
		t.Fatalf("root got a fifth handler of four: %v", err)
	default:
	}
	// bob's handler goes to dave, the first waiting who may take it (alice
	// may not: she holds hers).
	b.release()
	if err := <-daves; err != nil {
		t.Fatal(err)
	}
	// alice's goes to her own waiting request.
	a.release()
	if err := <-alice2; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-root2:
		t.Fatalf("root's second request took a handler none gave back: %v", err)
	default:
	}
}

// TestConns_PerUserRefusalNamesTheBound: a user whose connections are all
// busy in handlers gets a 503 naming the per-user bound for a new one,
// while another user's is taken.
func TestConns_PerUserRefusalNamesTheBound(t *testing.T) {
	t.Parallel()
	cs := newConns(16, 2, func(uid uint32) bool { return uid == 0 })
	open := func(uid uint32) (*connInfo, net.Conn) {
		t.Helper()
		c, peer := net.Pipe()
		t.Cleanup(func() { c.Close(); peer.Close() })
		ctx := context.WithValue(context.Background(), peerKey{}, peerConn{peer: Peer{UID: uid}})
		info := cs.context(ctx, c).Value(connKey{}).(*connInfo)
		cs.hook(c, http.StateNew)
		return info, c
	}
	for range 2 {
		info, _ := open(1001)
		cs.mu.Lock()
		info.serving = true // working in a handler
		cs.mu.Unlock()
	}
	third, _ := open(1001)
	if !strings.Contains(third.refused, "TT_DEVICE_HTTP_MAX_CONNS_PER_USER") || !strings.Contains(third.refused, "uid 1001") {
		t.Fatalf("a third busy connection of one user: refused %q", third.refused)
	}
	if other, _ := open(1002); other.refused != "" || other.closing {
		t.Fatalf("another user's connection was refused: %q", other.refused)
	}
}

// TestServer_RestingWhileLongPollsWait: a long-poll waiting holds no
// handler, so the daemon counts as resting meanwhile (what it gives back
// at rest depends on it); a request worked on is not rest.
func TestServer_RestingWhileLongPollsWait(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	cmd, release := d.gate()
	defer release()
	id := d.queue("0", cmd).JobID
	d.waitOutput(id, "started")
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.client.Result(d.ctx(), id, 30*time.Second)
	}()
	poll(t, "a long-poll", func() bool { return d.srv.slots.polling.Load() == 1 })
	poll(t, "rest while it waits", func() bool { return d.srv.RestingFor() > 50*time.Millisecond })
	if d.srv.IdleFor() != 0 {
		t.Fatalf("IdleFor %v with a request in progress", d.srv.IdleFor())
	}
	sl := d.srv.slots.claim(who{reserved: true})
	if err := sl.acquire(d.ctx()); err != nil {
		t.Fatal(err)
	}
	if r := d.srv.RestingFor(); r != 0 {
		t.Fatalf("RestingFor %v while a handler works", r)
	}
	sl.release()
	release()
	<-done
}

// TestConns_AllBusyRefusalNamesTheBound: when every connection is working
// in a handler (none idle, none a long-poll), a new one is refused with a
// 503 naming TT_DEVICE_HTTP_MAX_CONNS; when one of them is a long-poll,
// that long-poll is told to answer instead.
func TestConns_AllBusyRefusalNamesTheBound(t *testing.T) {
	t.Parallel()
	cs := newConns(2, 2, func(uint32) bool { return true })
	open := func() *connInfo {
		t.Helper()
		c, peer := net.Pipe()
		t.Cleanup(func() { c.Close(); peer.Close() })
		info := cs.context(context.Background(), c).Value(connKey{}).(*connInfo)
		cs.hook(c, http.StateNew)
		return info
	}
	a, b := open(), open()
	cs.mu.Lock()
	a.serving, b.serving = true, true
	b.poll = &pollWait{since: time.Now(), early: make(chan struct{})}
	cs.mu.Unlock()
	third := open()
	if third.refused != "" {
		t.Fatalf("refused %q with a long-poll open", third.refused)
	}
	select {
	case <-b.poll.early:
	default:
		t.Fatal("the long-poll was not told to answer")
	}
	cs.mu.Lock()
	third.serving = true
	cs.mu.Unlock()
	if fourth := open(); !strings.Contains(fourth.refused, "TT_DEVICE_HTTP_MAX_CONNS") {
		t.Fatalf("a connection with every other one busy: refused %q", fourth.refused)
	}
}
