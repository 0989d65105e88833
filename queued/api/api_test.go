package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestEnsureToken_ReusesOnlyAPrivateToken(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadToken(dir); !errors.Is(err, ErrNoToken) {
		t.Fatalf("ReadToken before start = %v", err)
	}
	tok, err := EnsureToken(dir)
	if err != nil || len(tok) != 64 {
		t.Fatalf("EnsureToken = %q, %v", tok, err)
	}
	again, err := EnsureToken(dir)
	if err != nil || again != tok {
		t.Fatalf("token not reused: %q, %v", again, err)
	}
	if got, err := ReadToken(dir); err != nil || got != tok {
		t.Fatalf("ReadToken = %q, %v", got, err)
	}
	path := filepath.Join(dir, TokenFile)
	os.Chmod(path, 0o640)
	fresh, err := EnsureToken(dir)
	if err != nil || fresh == tok {
		t.Fatalf("group-readable token reused: %v", err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("token mode %v", fi.Mode())
	}
	os.WriteFile(path, []byte("short\n"), 0o600)
	if _, err := ReadToken(dir); err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Fatalf("malformed token read: %v", err)
	}
	if err := WriteAddress(dir, "http://127.0.0.1:1234"); err != nil {
		t.Fatal(err)
	}
	if url, err := ReadAddress(dir); err != nil || url != "http://127.0.0.1:1234" {
		t.Fatalf("ReadAddress = %q, %v", url, err)
	}
}

func TestClient_ErrorsCarryStatusAndMessage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"wrong token"}`))
			return
		}
		if r.URL.Path == "/queue" && r.Header.Get("Content-Type") == "application/json" {
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error":"queue full"}`))
			return
		}
		w.WriteHeader(http.StatusBadGateway)
		w.Write([]byte("not json"))
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := NewClient(srv.URL+"/", "tok")
	defer c.Close()
	_, err := c.Queue(ctx, QueueRequest{Cmd: "true", Cwd: "/"})
	var e *Error
	if !errors.As(err, &e) || e.StatusCode != 429 || e.Message != "queue full" || !IsStatus(err, 429) {
		t.Fatalf("Queue error = %v", err)
	}
	// An answer that is not queued's JSON says so instead of dumping the
	// page.
	if _, err := c.Status(ctx); !IsStatus(err, 502) || !errors.As(err, &e) || !e.NotQueued ||
		!strings.Contains(err.Error(), "is not queued") || strings.Contains(err.Error(), "not json") {
		t.Fatalf("Status error = %v", err)
	}
	bad := NewClient(srv.URL, "nope")
	defer bad.Close()
	if _, err := bad.Job(ctx, "abcdef"); !IsStatus(err, 401) {
		t.Fatalf("Job error = %v", err)
	}
}

// TestClient_KeepsConnectionsForConcurrentUse has 64 callers share one
// Client for two rounds of requests that are all in flight at once: the
// second round reuses the first round's 64 connections and dials none.
// The answers end in 32 KiB of white space after the JSON value, more
// than any read-ahead, so the client must read past the value (as it must
// past a chunked body's last chunk) for the connection to be reused.
func TestClient_KeepsConnectionsForConcurrentUse(t *testing.T) {
	const callers = 64
	var dialed, arrived atomic.Int64
	rounds := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	padding := strings.Repeat("x", 8<<10)
	trailing := bytes.Repeat([]byte(" "), 32<<10)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := arrived.Add(1)
		round := rounds[(n-1)/callers]
		if n%callers == 0 {
			close(round)
		}
		select {
		case <-round:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(Status{Warnings: []string{padding}})
		w.Write(trailing)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := NewClient(srv.URL, "tok")
	defer c.Close()
	for round := range rounds {
		var wg sync.WaitGroup
		for range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if st, err := c.Status(ctx); err != nil || len(st.Warnings) != 1 {
					t.Errorf("round %d: %+v, %v", round, len(st.Warnings), err)
				}
			}()
		}
		wg.Wait()
	}
	if n := dialed.Load(); n != callers {
		t.Fatalf("%d callers in two rounds opened %d connections, want %d", callers, n, callers)
	}
}

// TestClient_FollowsNoRedirect: a redirect is an error, and the request
// is not sent again to where it points.
func TestClient_FollowsNoRedirect(t *testing.T) {
	var elsewhere atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			elsewhere.Add(1)
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"job_id":"x"}`))
			return
		}
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := NewClient(srv.URL, "tok")
	defer c.Close()
	if _, err := c.Queue(ctx, QueueRequest{Cmd: "true", Cwd: "/"}); !IsStatus(err, http.StatusTemporaryRedirect) {
		t.Fatalf("Queue answered by a redirect: %v", err)
	}
	if _, err := c.Kill(ctx, "abcdef"); !IsStatus(err, http.StatusTemporaryRedirect) {
		t.Fatalf("Kill answered by a redirect: %v", err)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("the client followed %d redirects", n)
	}
}

// TestNewClient_Transport pins the settings the tests above cannot see:
// no proxy, bounded dials and answer waits that still fit a long-poll,
// no whole-request timeout (contexts bound calls), idle connections
// dropped before the daemon drops them.
func TestNewClient_Transport(t *testing.T) {
	c := NewClient("http://127.0.0.1:5741", "tok")
	defer c.Close()
	tr, ok := c.http.Transport.(*http.Transport)
	if !ok {
		t.Fatalf("transport %T", c.http.Transport)
	}
	switch {
	case tr.Proxy != nil:
		t.Error("the client may use a proxy")
	case tr.DialContext == nil:
		t.Error("dials are not bounded")
	case tr.MaxIdleConnsPerHost < 64 || tr.MaxIdleConns < tr.MaxIdleConnsPerHost:
		t.Errorf("idle connections %d per host, %d in all", tr.MaxIdleConnsPerHost, tr.MaxIdleConns)
	case tr.IdleConnTimeout <= 0 || tr.IdleConnTimeout >= 2*time.Minute:
		t.Errorf("idle timeout %s, want under the daemon's 2m", tr.IdleConnTimeout)
	case tr.ResponseHeaderTimeout <= MaxWait+time.Minute:
		t.Errorf("answer timeout %s cuts long-polls short", tr.ResponseHeaderTimeout)
	case c.http.Timeout != 0:
		t.Errorf("whole-request timeout %s", c.http.Timeout)
	}
}

// MaxSocketPath is what a socket address holds, less its NUL.
func TestMaxSocketPathIsTheKernels(t *testing.T) {
	if want := len(unix.RawSockaddrUnix{}.Path) - 1; MaxSocketPath != want {
		t.Errorf("MaxSocketPath %d, want %d", MaxSocketPath, want)
	}
}

// Kill with an empty id asks nothing: the daemon would take it as no id
// and stop the caller's running job.
func TestKill_EmptyIDIsRefusedBeforeAsking(t *testing.T) {
	c := NewClient("http://127.0.0.1:1", "")
	defer c.Close()
	_, err := c.Kill(context.Background(), " ")
	if err == nil || !strings.Contains(err.Error(), "no job id") {
		t.Fatalf("Kill(\" \") = %v; want a refusal naming the missing id", err)
	}
}
