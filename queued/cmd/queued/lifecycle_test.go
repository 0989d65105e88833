package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/cmdtest"
	"github.com/ttkit/ttkit/queued/api"
)

// waitFile polls until the file at path contains want, or fails after d.
func waitFile(t *testing.T, path, want string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held %q within %s: %q", path, want, d, b)
		}
		time.Sleep(10 * time.Millisecond) // polling a file the job writes
	}
}

// TestQueued_FailedStartChangesNoJob: a start that fails (its port is
// taken) must not touch the queue: the jobs queued before stay queued and
// run, in order, once a start succeeds.
func TestQueued_FailedStartChangesNoJob(t *testing.T) {
	t.Parallel()
	state, work := t.TempDir(), t.TempDir()
	d := startDaemon(t, state)
	gate := d.queue("0", work, "echo started; sleep 1000")
	var queued []string
	for i := range 3 {
		queued = append(queued, d.queue("0", work, fmt.Sprintf("echo %d >> order", i)))
	}
	d.waitOutput(gate, "started")
	d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.exited

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cmd := d.cmd.Path
	fail := startFailing(t, cmd, state, taken.Addr().String())
	if !strings.Contains(fail, "listening on") {
		t.Fatalf("the start on a taken port failed with %q; want a listen error", fail)
	}
	taken.Close()

	d2 := startDaemon(t, state)
	for i, id := range queued {
		r, err := d2.client.WaitResult(ctx(t), id)
		if err != nil || *r.ExitCode != 0 || r.Outcome != "success" {
			t.Fatalf("queued job %d after a failed start: %+v, %v", i, r, err)
		}
	}
	if out, _ := os.ReadFile(filepath.Join(work, "order")); string(out) != "0\n1\n2\n" {
		t.Fatalf("order %q", out)
	}
}

// startFailing runs queued on addr, which must fail, and returns its
// output.
func startFailing(t *testing.T, path, state, addr string) string {
	t.Helper()
	d := &daemon{t: t, state: state, stderr: &cmdtest.Buffer{}, exited: make(chan struct{})}
	c := newCmd(path, "--listen", addr)
	c.Env = env("TT_DEVICE_IDS=0,1", "TT_DEVICE_LOG_DIR="+state, "TT_DEVICE_KILL_GRACE=2")
	c.Stderr = d.stderr
	if err := c.Run(); err == nil {
		t.Fatalf("queued started on a taken port:\n%s", d.stderr.String())
	}
	return d.stderr.String()
}

// TestQueued_StopIsImmediate: on SIGTERM the running job gets SIGINT at
// once, before the HTTP server stops (the old stop shut the server first,
// waiting up to 10 s for its connections), and nothing else starts, even
// with an idle connection and a half-sent request open; a submission
// while the job's SIGINT handler runs is refused with 503 and the reason;
// once the job ends the daemon exits without waiting for the half-sent
// request. Each step waits for its event, with a bound generous for a
// busy machine: the job's handler holds until the test has asked (the
// kill grace is long enough for that), so the order is what is checked,
// not how fast two cores spared it.
func TestQueued_StopIsImmediate(t *testing.T) {
	t.Parallel()
	state, work := t.TempDir(), t.TempDir()
	d := startDaemonWith(t, state, bin, "TT_DEVICE_KILL_GRACE=120")
	marks, goOn := filepath.Join(work, "marks"), filepath.Join(work, "go")
	// `sleep & wait`, not a foreground sleep: bash runs a trap only once
	// its foreground child has ended, and a SIGINT that lands while it
	// forks that child is taken by the child's copy of the trap before
	// its exec, so the sleep would never see it; wait returns at once.
	running := d.queue("0", work, "trap 'echo INT >> marks; while [ ! -e go ]; do sleep 0.05; done; exit 7' INT; echo started; sleep 1000 & wait")
	queued := d.queue("0", work, "echo q >> marks")
	d.waitOutput(running, "started")

	url, _ := api.ReadAddress(state)
	host := strings.TrimPrefix(url, "http://")
	idle, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	half, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	tok, _ := api.ReadToken(state)
	fmt.Fprintf(half, "POST /queue HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"cmd\":", host, tok)

	sent := time.Now()
	d.cmd.Process.Signal(syscall.SIGTERM)
	waitFile(t, marks, "INT", time.Minute)

	// The job's handler holds: the daemon still answers, and refuses new
	// work with the reason.
	_, err = d.client.Queue(ctx(t), api.QueueRequest{Cmd: "echo late >> marks", Cwd: work, DeviceID: "1"})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.StatusCode != 503 || !strings.Contains(ae.Message, "stopping") {
		t.Fatalf("a submission during the stop: %v; want 503 naming the stop", err)
	}
	if err := os.WriteFile(goOn, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Under the 30 s a half-sent body may take (bodyReadTimeout): a stop
	// that waited for the half-sent request would take that long.
	ended := time.Now()
	select {
	case <-d.exited:
	case <-time.After(25 * time.Second):
		t.Fatalf("queued still running %s after its job ended (%s after SIGTERM): it waits for the half-sent request", time.Since(ended), time.Since(sent))
	}
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d\n%s", code, d.stderr.String())
	}
	if b, _ := os.ReadFile(marks); string(b) != "INT\n" {
		t.Fatalf("marks %q: only the running job's SIGINT handler should have run", b)
	}

	d2 := startDaemon(t, state)
	r, err := d2.client.Job(ctx(t), running)
	if err != nil || r.Outcome != "interrupted" || r.Error != "interrupted by service stop" {
		t.Fatalf("running job after the stop: %+v, %v", r, err)
	}
	if r, err := d2.client.WaitResult(ctx(t), queued); err != nil || *r.ExitCode != 0 {
		t.Fatalf("queued job after restart: %+v, %v", r, err)
	}
}

// TestQueued_KillGraceZero: TT_DEVICE_KILL_GRACE=0 and
// TT_DEVICE_TERM_GRACE=0 send SIGKILL at once, even to a job that
// ignores SIGINT and SIGTERM.
func TestQueued_KillGraceZero(t *testing.T) {
	t.Parallel()
	state, work := t.TempDir(), t.TempDir()
	d := startDaemonWith(t, state, bin, "TT_DEVICE_KILL_GRACE=0", "TT_DEVICE_TERM_GRACE=0")
	id := d.queue("0", work, "trap '' INT TERM; echo started; sleep 1000")
	d.waitOutput(id, "started")
	if _, err := d.client.Kill(ctx(t), id); err != nil {
		t.Fatal(err)
	}
	c, cancel := contextWithTimeout(5 * time.Second)
	defer cancel()
	r, err := d.client.WaitResult(c, id)
	if err != nil || *r.ExitCode != -9 || r.Outcome != "killed" {
		t.Fatalf("kill with a grace of 0: %+v, %v; want SIGKILL (-9) at once", r, err)
	}
}

func newCmd(path string, args ...string) *exec.Cmd { return exec.Command(path, args...) }

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// TestQueued_ShippedUnitFitsTheKillGrace: the user unit's stop timeout is
// the one queued is told about, and the default grace fits in it.
func TestQueued_ShippedUnitFitsTheKillGrace(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../../deploy/systemd/queued.service")
	if err != nil {
		t.Fatal(err)
	}
	var stopSec, told string
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "TimeoutStopSec="); ok {
			stopSec = strings.TrimSuffix(v, "s")
		}
		if v, ok := strings.CutPrefix(line, "Environment=TT_DEVICE_STOP_TIMEOUT="); ok {
			told = v
		}
	}
	if stopSec == "" || stopSec != told {
		t.Fatalf("TimeoutStopSec=%q but TT_DEVICE_STOP_TIMEOUT=%q; they must agree", stopSec, told)
	}
	if got, want := stopSec, "90"; got != want {
		t.Fatalf("TimeoutStopSec %s; the default kill ladder (60 s + 15 s) plus %s needs %s", got, stopMargin, want)
	}
}

// TestQueued_WarnsWhenTheGraceDoesNotFit: a grace longer than the stop
// timeout allows is named at start.
func TestQueued_WarnsWhenTheGraceDoesNotFit(t *testing.T) {
	t.Parallel()
	d := startDaemonWith(t, t.TempDir(), bin, "TT_DEVICE_KILL_GRACE=80")
	if !strings.Contains(d.stderr.String(), "does not fit in the service manager's stop timeout") {
		t.Fatalf("no warning for an 80 s grace and a 15 s term grace in a 90 s stop timeout:\n%s", d.stderr.String())
	}
}

// TestQueued_WarnsWhenTheTaskLimitIsNotEnforced: where jobs get no cgroup
// of their own (no Delegate=yes), a TT_DEVICE_JOB_TASKS_MAX that cannot be
// enforced is named at start rather than silently ignored.
func TestQueued_WarnsWhenTheTaskLimitIsNotEnforced(t *testing.T) {
	t.Parallel()
	d := startDaemonWith(t, t.TempDir(), bin, "TT_DEVICE_JOB_TASKS_MAX=64")
	if !strings.Contains(d.stderr.String(), "TT_DEVICE_JOB_TASKS_MAX is not enforced") {
		t.Fatalf("no warning for a task limit without job cgroups:\n%s", d.stderr.String())
	}
}
