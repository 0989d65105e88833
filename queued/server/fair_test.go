package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/usertest"
	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/defaults"
)

// shared is an in-process daemon in system mode, served on a Unix socket
// every user may reach as well as on TCP, so a test can connect as any uid
// (usertest.DialUnixAs) and the kernel says who it is.
type shared struct {
	*daemon
	sock string
}

// startShared starts a shared daemon; it needs root to connect as other
// users.
func startShared(t *testing.T, tweak func(*Config)) *shared {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to connect as other users (CI runs as root)")
	}
	d := start(t, options{api: func(c *Config) {
		c.Mode, c.AllowPeer = api.SystemMode, func(Peer) error { return nil }
		if tweak != nil {
			tweak(c)
		}
	}})
	s := &shared{daemon: d, sock: filepath.Join(usertest.OpenDir(t), "queued.sock")}
	ln, err := ListenUnix(s.sock, 0o666, -1)
	if err != nil {
		t.Fatal(err)
	}
	hs := d.srv.NewHTTPServer()
	served := make(chan struct{})
	go func() { hs.Serve(ln); close(served) }()
	t.Cleanup(func() {
		d.srv.Close()
		hs.Close()
		<-served
		os.Remove(s.sock)
	})
	return s
}

// dial connects as uid (its gid the same number).
func (s *shared) dial(uid uint32) net.Conn {
	s.t.Helper()
	c, err := usertest.DialUnixAs(s.sock, uid, uid)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { c.Close() })
	return c
}

// ask sends one request as uid on a new connection and returns the
// status code and body, failing the test unless the answer comes within
// limit.
func (s *shared) ask(uid uint32, method, path, body string, limit time.Duration) (int, string) {
	s.t.Helper()
	c := s.dial(uid)
	defer c.Close()
	c.SetDeadline(time.Now().Add(limit))
	req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n", method, path)
	if body != "" {
		req += fmt.Sprintf("Content-Type: application/json\r\nContent-Length: %d\r\n", len(body))
	}
	if _, err := io.WriteString(c, req+"\r\n"+body); err != nil {
		s.t.Fatalf("%s %s as uid %d: %v", method, path, uid, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		s.t.Fatalf("%s %s as uid %d: no answer within %v: %v", method, path, uid, limit, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// generation is the status page's change generation now.
func (s *shared) generation() uint64 {
	s.t.Helper()
	code, body := s.raw(http.MethodGet, "/changes", "", nil)
	var ch changesResponse
	if err := json.Unmarshal([]byte(body), &ch); code != http.StatusOK || err != nil {
		s.t.Fatalf("GET /changes: %d %s", code, body)
	}
	return ch.Gen
}

const (
	flooder   = 4242 // a user who floods the socket
	colleague = 4243 // another user
)

// TestFair_OneUsersLongPollsLockNoOneOut: 256 long-polls (GET
// /changes?wait=60) from one user, as many as queued allows connections,
// used to make every other request, root's included, answer 503 "too
// many connections". Now one user holds at most a quarter of the
// connections and has at most half of those waiting (their oldest
// long-poll answers when they start another), and another user's and
// root's requests are answered at once.
func TestFair_OneUsersLongPollsLockNoOneOut(t *testing.T) {
	t.Parallel()
	s := startShared(t, nil)
	path := fmt.Sprintf("/changes?since=%d&wait=60", s.generation())
	for range defaults.HTTPMaxConns {
		c := s.dial(flooder)
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", path); err != nil {
			t.Fatal(err)
		}
	}
	// Every one of them is waiting, was answered early, or was closed.
	cs := s.srv.admission.conns
	poll(t, "the flood taken in", func() bool {
		return s.srv.slots.polling.Load()+cs.early.Load()+cs.evicted.Load()+cs.refused.Load() >= defaults.HTTPMaxConns
	})
	for range 5 {
		if code, body := s.ask(colleague, http.MethodGet, "/status", "", 2*time.Second); code != http.StatusOK {
			t.Fatalf("another user's GET /status: %d %s", code, cut(body, 200))
		}
		// The flooder's share, and the few of root's and the colleague's.
		// A long-poll told to answer counts until its goroutine has run,
		// which on two busy cores can take a moment: the share is what
		// the counts come down to, not what one sample shows.
		poll(t, "the open connections and waiting long-polls to come down to one user's share", func() bool {
			st := s.statusWithin(2 * time.Second) // root, over TCP
			return st.HTTP.Conns <= st.HTTP.ConnsPerUser+4 && st.HTTP.LongPolls <= st.HTTP.WaitsPerUser+4
		})
	}
	if st := s.statusWithin(2 * time.Second); st.HTTP.AnsweredEarly == 0 && st.HTTP.Evicted == 0 {
		t.Errorf("the flood was neither answered early nor evicted: %+v", st.HTTP)
	}
}

// TestFair_SlowBodiesOfOneUserKeepNoOneWaiting: 64 POSTs from one user
// whose bodies never finish arriving used to take every handler before
// their bodies were read, and root's GET /status then waited up to 30
// seconds. A body is now read before its request takes a handler, so
// root and another user are answered at once.
func TestFair_SlowBodiesOfOneUserKeepNoOneWaiting(t *testing.T) {
	t.Parallel()
	s := startShared(t, nil)
	body := fmt.Sprintf(`{"cmd":"true","cwd":%q}`, s.work)
	for range 64 {
		c := s.dial(flooder)
		fmt.Fprintf(c, "POST /queue HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:5])
	}
	poll(t, "the slow bodies' connections", func() bool { return s.statusWithin(5*time.Second).HTTP.Conns >= 50 })
	for range 5 {
		t0 := time.Now()
		st := s.statusWithin(time.Second)
		if took := time.Since(t0); took > 500*time.Millisecond || st.HTTP.Waiting > 0 {
			t.Fatalf("root's GET /status took %v with 64 slow bodies; %d requests wait for a handler", took, st.HTTP.Waiting)
		}
		if code, answer := s.ask(colleague, http.MethodGet, "/status", "", time.Second); code != http.StatusOK {
			t.Fatalf("another user's GET /status: %d %s", code, cut(answer, 200))
		}
	}
}

// TestFair_ConnectionsPerUser: one user's connections beyond their share
// close their own idle ones, never another user's.
func TestFair_ConnectionsPerUser(t *testing.T) {
	t.Parallel()
	s := startShared(t, func(c *Config) { c.MaxConns, c.ConnsPerUser = 16, 4 })
	mine := s.dial(colleague) // idle, and the oldest
	for range 12 {
		s.dial(flooder) // idle: sends nothing
	}
	st := s.statusWithin(2 * time.Second)
	if st.HTTP.Conns > 1+4+1 { // the colleague, the flooder's share, root's
		t.Fatalf("%d connections open; want one user's at most 4 of them", st.HTTP.Conns)
	}
	// The colleague's idle connection, the oldest of all, was left alone.
	mine.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprint(mine, "GET /status HTTP/1.1\r\nHost: localhost\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(mine), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the other user's oldest idle connection: %v, %v", resp, err)
	}
	resp.Body.Close()
}

// TestFair_ReserveForRootAndAdmins: when users fill every connection open
// to them, root still gets one: a user's new connection is refused (503
// naming the bound) once their peers are all busy, root's is served.
func TestFair_ReserveForRootAndAdmins(t *testing.T) {
	t.Parallel()
	s := startShared(t, func(c *Config) { c.MaxConns, c.ConnsPerUser = 16, 16 })
	gen := s.generation()
	// Users other than root fill the 14 connections open to them with
	// long-polls (two are kept for root and the admins).
	for i := range 14 {
		c := s.dial(flooder + uint32(i%2))
		fmt.Fprintf(c, "GET /changes?since=%d&wait=60 HTTP/1.1\r\nHost: localhost\r\n\r\n", gen)
		poll(t, "a long-poll", func() bool { return s.srv.slots.polling.Load() >= int64(i+1) })
	}
	// Root's connections are served without a long-poll being cut short.
	early := s.statusWithin(2 * time.Second).HTTP.AnsweredEarly
	for range 3 {
		if code, body := s.ask(0, http.MethodGet, "/status", "", 2*time.Second); code != http.StatusOK {
			t.Fatalf("root's GET /status on the socket: %d %s", code, cut(body, 200))
		}
	}
	if st := s.statusWithin(2 * time.Second).HTTP; st.AnsweredEarly != early || st.ReservedConns != 2 {
		t.Fatalf("root's requests cut %d long-polls short (reserve %d); want none", st.AnsweredEarly-early, st.ReservedConns)
	}
	// A third user's request makes room among the users: the oldest
	// long-poll of the one holding most answers.
	if code, body := s.ask(flooder+2, http.MethodGet, "/status", "", 2*time.Second); code != http.StatusOK {
		t.Fatalf("a third user's GET /status: %d %s", code, cut(body, 200))
	}
	if st := s.statusWithin(2 * time.Second).HTTP; st.AnsweredEarly != early+1 {
		t.Fatalf("%d long-polls answered early for the third user; want 1", st.AnsweredEarly-early)
	}
}

// TestStatus_SaysEachUsersBounds: a shared daemon's status says how many
// queued and finished jobs one user may have; a user daemon's, whose one
// user has the whole queue, says neither.
func TestStatus_SaysEachUsersBounds(t *testing.T) {
	t.Parallel()
	s := startShared(t, nil)
	code, body := s.ask(1001, http.MethodGet, "/status", "", 10*time.Second)
	var st api.Status
	if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil {
		t.Fatalf("GET /status: %d %v", code, err)
	}
	if st.MaxQueuedPerUser != s.sched.MaxQueuedPerUser() || st.MaxCompletedPerUser != s.sched.MaxCompletedPerUser() || st.MaxCompletedPerUser == 0 {
		t.Errorf("shared status: %d queued, %d finished per user; want %d and %d",
			st.MaxQueuedPerUser, st.MaxCompletedPerUser, s.sched.MaxQueuedPerUser(), s.sched.MaxCompletedPerUser())
	}
	d := start(t, options{})
	own, err := d.client.Status(d.ctx())
	if err != nil || own.MaxQueuedPerUser != 0 || own.MaxCompletedPerUser != 0 {
		t.Errorf("a user daemon's status: %d queued, %d finished per user, %v; want neither", own.MaxQueuedPerUser, own.MaxCompletedPerUser, err)
	}
}
