package scheduler

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	runner.ServeExecJob() // jobs are started through this binary, re-executed
	goleak.VerifyTestMain(m)
}

// errInjected is the fault faultStore returns.
var errInjected = errors.New("injected write fault")

// faultStore wraps the real store and fails writes while a fault is set.
type faultStore struct {
	*store.Store
	log   *store.StartLog // the start log beside the store
	mu    sync.Mutex
	fault func(jobs []store.Job) error
	// markFault, when set, is MarkStart's fault instead of fault: a test
	// can then fail or hold a marked start's commit and not its mark.
	markFault func(jobs []store.Job) error
	// marks counts the starts the scheduler asked the start log to mark.
	marks atomic.Int64
	// specFault, when set, is what reading a job's spec returns instead
	// of the spec.
	specFault atomic.Pointer[error]
}

// Spec reads a job's spec, unless specFault says otherwise.
func (f *faultStore) Spec(id string) (store.Spec, error) {
	if err := f.specFault.Load(); err != nil {
		return store.Spec{}, *err
	}
	return f.Store.Spec(id)
}

func (f *faultStore) set(fault func([]store.Job) error) {
	f.mu.Lock()
	f.fault = fault
	f.mu.Unlock()
}

// check runs the fault outside the lock, so a fault may block one write
// while others go on.
func (f *faultStore) check(jobs []store.Job) error {
	f.mu.Lock()
	fault := f.fault
	f.mu.Unlock()
	if fault == nil {
		return nil
	}
	return fault(jobs)
}

func (f *faultStore) Put(jobs ...store.Job) error {
	if err := f.check(jobs); err != nil {
		return err
	}
	return f.Store.Put(jobs...)
}

func (f *faultStore) Commit(cards []store.Card, jobs ...store.Job) error {
	if err := f.check(jobs); err != nil {
		return err
	}
	return f.Store.Commit(cards, jobs...)
}

// MarkStart is the write that makes a start durable in the start log:
// the fault sees it as the job's running record, the record that start
// would otherwise commit, so a test that fails or holds "the start"
// does so whichever way it goes. Clearing a slot is a write of no job.
func (f *faultStore) MarkStart(card int, id string, attempt int) error {
	var seen []store.Job
	if id != "" {
		f.marks.Add(1)
		rec, err := f.Store.Job(id)
		if err != nil {
			return err
		}
		rec.State, rec.Attempt = store.StateRunning, attempt
		seen = []store.Job{rec}
	}
	f.mu.Lock()
	markFault := f.markFault
	f.mu.Unlock()
	if markFault != nil {
		if err := markFault(seen); err != nil {
			return err
		}
	} else if err := f.check(seen); err != nil {
		return err
	}
	return f.log.MarkStart(card, id, attempt)
}

// Marks reads the start log.
func (f *faultStore) Marks() ([]store.StartMark, error) { return f.log.Marks() }

func (f *faultStore) Probe() error {
	if err := f.check(nil); err != nil {
		return err
	}
	return f.Store.Probe()
}

func (f *faultStore) Prune(r store.Retention) ([]string, error) {
	if err := f.check(nil); err != nil {
		return nil, err
	}
	return f.Store.Prune(r)
}

func always(error) func([]store.Job) error {
	return func([]store.Job) error { return errInjected }
}

// clock is a settable fake clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type bundle struct {
	t     *testing.T
	dir   string
	work  string // a directory jobs run in
	st    *store.Store
	fs    *faultStore
	s     *Scheduler
	opt   Options
	clock *clock
}

// setup opens a real store in a temp dir and starts a scheduler on cards
// 0 and 1; tweak adjusts the options first.
func setup(t *testing.T, tweak func(*Options)) *bundle {
	t.Helper()
	dir := t.TempDir()
	b := &bundle{t: t, dir: dir, work: t.TempDir()}
	b.open()
	b.opt = Options{
		Store: b.fs, Devices: []int{0, 1}, OutputDir: filepath.Join(dir, "output"),
		KillGrace: 2 * time.Second, TermGrace: 2 * time.Second, RetryMin: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if tweak != nil {
		tweak(&b.opt)
	}
	b.start()
	return b
}

func (b *bundle) open() {
	st, err := store.Open(b.dir, store.Options{})
	if err != nil {
		b.t.Fatal(err)
	}
	log, err := store.OpenStartLog(b.dir)
	if err != nil {
		b.t.Fatal(err)
	}
	b.st = st
	b.fs = &faultStore{Store: st, log: log}
	b.t.Cleanup(func() { st.Close(); log.Close() })
}

func (b *bundle) start() {
	b.opt.Store, b.opt.Starts = b.fs, b.fs
	s, err := New(b.opt)
	if err != nil {
		b.t.Fatal(err)
	}
	b.s = s
	b.t.Cleanup(s.Stop)
}

// restart stops the scheduler and starts a new one on the same store.
func (b *bundle) restart() {
	b.s.Stop()
	b.start()
}

func (b *bundle) submit(card int, cmd string) JobInfo {
	b.t.Helper()
	info, err := b.s.Submit(JobSpec{Card: card, Cmd: cmd, Cwd: b.work})
	if err != nil {
		b.t.Fatal(err)
	}
	return info
}

// gate returns a command that prints "started" and then blocks until
// release is called.
func (b *bundle) gate() (cmd string, release func()) {
	f := filepath.Join(b.t.TempDir(), "open")
	cmd = fmt.Sprintf("echo started; while [ ! -e %q ]; do sleep 0.01; done", f)
	return cmd, func() {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			b.t.Fatal(err)
		}
	}
}

// wait blocks on the job's change notifications until cond holds.
func (b *bundle) wait(id, what string, cond func(Watch) bool) Watch {
	b.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		w, err := b.s.Watch(id)
		if err != nil {
			b.t.Fatal(err)
		}
		if cond(w) {
			return w
		}
		select {
		case <-w.JobChanged:
		case <-w.OutputChanged:
		case <-deadline:
			b.t.Fatalf("job %s: timed out waiting for %s; last state %s", id[:8], what, w.Info.State)
		}
	}
}

func (b *bundle) waitDone(id string) JobInfo {
	b.t.Helper()
	return b.wait(id, "done", func(w Watch) bool { return w.Done && !w.Info.Held }).Info
}

// waitOutput waits until the job's output contains want; a job that
// ended without it fails the test at once, since no more output comes.
func (b *bundle) waitOutput(id, want string) {
	b.t.Helper()
	var data []byte
	w := b.wait(id, "output "+want, func(w Watch) bool {
		data, _ = os.ReadFile(w.Path)
		return strings.Contains(string(data), want) || w.Done && !w.Info.Held
	})
	if !strings.Contains(string(data), want) {
		b.t.Fatalf("job %s ended (%s %q) without output %q; its output: %q", id[:8], w.Info.Outcome, w.Info.Error, want, data)
	}
}

// poll waits for cond with a deadline, for state that has no channel.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func output(t *testing.T, b *bundle, id string) string {
	t.Helper()
	data, err := os.ReadFile(b.s.OutputPath(id))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
