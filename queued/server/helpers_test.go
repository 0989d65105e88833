package server

import (
	"context"
	"fmt"
	"github.com/ttkit/ttkit/queued/api"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/scheduler"
	"github.com/ttkit/ttkit/queued/store"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	runner.ServeExecJob() // jobs are started through this binary, re-executed
	goleak.VerifyTestMain(m)
}

// faultStore wraps the real store and its start log, as the daemon has
// them, and fails writes to either while fault is set.
type faultStore struct {
	*store.Store
	log   *store.StartLog
	mu    sync.Mutex
	fault error
}

// MarkStart fails with the fault as a commit does: with the store
// failing, a start can be made durable nowhere.
func (f *faultStore) MarkStart(card int, id string, attempt int) error {
	if err := f.err(); err != nil {
		return err
	}
	return f.log.MarkStart(card, id, attempt)
}

func (f *faultStore) Marks() ([]store.StartMark, error) { return f.log.Marks() }

func (f *faultStore) set(err error) { f.mu.Lock(); f.fault = err; f.mu.Unlock() }
func (f *faultStore) err() error    { f.mu.Lock(); defer f.mu.Unlock(); return f.fault }

func (f *faultStore) Put(jobs ...store.Job) error {
	if err := f.err(); err != nil {
		return err
	}
	return f.Store.Put(jobs...)
}

func (f *faultStore) Commit(cards []store.Card, jobs ...store.Job) error {
	if err := f.err(); err != nil {
		return err
	}
	return f.Store.Commit(cards, jobs...)
}

func (f *faultStore) Probe() error {
	if err := f.err(); err != nil {
		return err
	}
	return f.Store.Probe()
}

type daemon struct {
	t      testing.TB
	dir    string // state directory
	work   string // a directory for jobs
	url    string
	token  string
	st     *store.Store
	fs     *faultStore
	sched  *scheduler.Scheduler
	srv    *Server
	client *api.Client
}

type options struct {
	sched func(*scheduler.Options)
	api   func(*Config)
	dir   string
}

// start runs a real daemon in-process: bbolt in a temp dir, a scheduler on
// cards 0 and 1, the HTTP server on a free 127.0.0.1 port.
func start(t testing.TB, o options) *daemon {
	t.Helper()
	d := &daemon{t: t, dir: o.dir, work: t.TempDir()}
	if d.dir == "" {
		d.dir = t.TempDir()
	}
	st, err := store.Open(d.dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d.st = st
	starts, err := store.OpenStartLog(d.dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { starts.Close() })
	d.fs = &faultStore{Store: st, log: starts}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	so := scheduler.Options{Store: d.fs, Starts: d.fs, Devices: []int{0, 1}, OutputDir: filepath.Join(d.dir, "output"),
		KillGrace: 2 * time.Second, TermGrace: 2 * time.Second, RetryMin: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond, Logger: logger}
	if o.sched != nil {
		o.sched(&so)
	}
	d.sched, err = scheduler.New(so)
	if err != nil {
		t.Fatal(err)
	}
	d.token, err = api.EnsureToken(d.dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Scheduler: d.sched, Token: d.token, MaxTimeout: 86400 * time.Second, MaxRequestBytes: 1 << 20, Workers: 16, Logger: logger}
	if o.api != nil {
		o.api(&cfg)
	}
	d.srv, err = NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := d.srv.NewHTTPServer()
	served := make(chan struct{})
	go func() { hs.Serve(ln); close(served) }()
	d.url = "http://" + ln.Addr().String()
	d.client = api.NewClient(d.url, d.token)
	t.Cleanup(func() {
		d.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		<-served
		d.sched.Stop()
		st.Close()
		d.client.Close()
	})
	return d
}

func (d *daemon) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	d.t.Cleanup(cancel)
	return ctx
}

func (d *daemon) queue(card, cmd string) api.QueueResponse {
	d.t.Helper()
	r, err := d.client.Queue(d.ctx(), api.QueueRequest{Cmd: cmd, Cwd: d.work, DeviceID: card})
	if err != nil {
		d.t.Fatal(err)
	}
	return r
}

func (d *daemon) result(id string) api.Job {
	d.t.Helper()
	j, err := d.client.WaitResult(d.ctx(), id)
	if err != nil {
		d.t.Fatal(err)
	}
	return j
}

// gate returns a command that prints "started" then blocks until release.
func (d *daemon) gate() (string, func()) {
	f := filepath.Join(d.t.TempDir(), "open")
	return fmt.Sprintf("echo started; while [ ! -e %q ]; do sleep 0.01; done; echo released", f), func() {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			d.t.Fatal(err)
		}
	}
}

// waitOutput long-polls until the job's output contains want.
func (d *daemon) waitOutput(id, want string) {
	d.t.Helper()
	var out []byte
	for !strings.Contains(string(out), want) {
		ch, err := d.client.Logs(d.ctx(), id, api.LogsQuery{Offset: int64(len(out)), Wait: 10 * time.Second})
		if err != nil {
			d.t.Fatal(err)
		}
		out = append(out, ch.Data...)
		if ch.Done && !strings.Contains(string(out), want) {
			d.t.Fatalf("job ended without printing %q: %q", want, out)
		}
	}
}

// raw sends a request with full control over method, headers and body and
// returns the status and body.
func (d *daemon) raw(method, path, body string, hdr map[string]string) (int, string) {
	d.t.Helper()
	req, err := http.NewRequestWithContext(d.ctx(), method, d.url+path, strings.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// poll waits for cond with a deadline, for state that has no channel.
func poll(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// contains reports whether list holds s.
func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
