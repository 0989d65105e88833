package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/cmdtest"
	"github.com/ttkit/ttkit/queued/api"
	"go.uber.org/goleak"
)

// bin is the real queued binary, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	if os.Getenv(asClientEnv) != "" {
		os.Exit(runAsClient()) // this binary, run as another user by a system-mode test
	}
	if text, ok := os.LookupEnv(typeEnv); ok {
		os.Exit(typeIntoTerminal(text)) // this binary, run as a job that tries to type into queued's terminal
	}
	dir, err := os.MkdirTemp("", "queued-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "queued")
	if out, err := exec.Command("go", "build", "-o", dir+"/", ".", "../queued-exec").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building queued: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// env is the test's environment without any TT_ or OTEL_ variable, plus
// extra.
func env(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TT_") && !strings.HasPrefix(kv, "OTEL_") {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

type daemon struct {
	t      *testing.T
	state  string
	cmd    *exec.Cmd
	stderr *cmdtest.Buffer
	exited chan struct{}
	client *api.Client
}

// startDaemon runs the binary on cards 0 and 1 with a random port and
// waits until it has written its address.
func startDaemon(t *testing.T, state string) *daemon {
	t.Helper()
	return startDaemonWith(t, state, bin)
}

// startDaemonWith runs the binary at path with extra environment variables.
func startDaemonWith(t *testing.T, state, path string, extra ...string) *daemon {
	t.Helper()
	return startDaemonCmd(t, state, exec.Command(path, "--listen", "127.0.0.1:0"), extra...)
}

// startDaemonCmd starts cmd, a queued told to listen on a free loopback
// port, and waits until it has written its address.
func startDaemonCmd(t *testing.T, state string, cmd *exec.Cmd, extra ...string) *daemon {
	t.Helper()
	os.Remove(filepath.Join(state, api.AddressFile))
	d := spawn(t, state, cmd, extra...)
	d.waitStarted(func() bool {
		url, err := api.ReadAddress(state)
		if err != nil {
			return false
		}
		tok, err := api.ReadToken(state)
		if err != nil {
			t.Fatal(err)
		}
		d.client = api.NewClient(url, tok)
		return true
	})
	return d
}

// waitStarted polls ready until it holds, failing the test when queued
// exits first or does not get there within 20 s.
func (d *daemon) waitStarted(ready func() bool) {
	d.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ready() {
		select {
		case <-d.exited:
			d.t.Fatalf("queued exited at start:\n%s", d.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("queued did not start:\n%s", d.stderr.String())
		}
		time.Sleep(5 * time.Millisecond) // polling for the address file or the socket
	}
}

// spawn starts cmd as queued on cards 0 and 1 with state as its state
// directory and extra environment variables; the test's end kills it.
func spawn(t *testing.T, state string, cmd *exec.Cmd, extra ...string) *daemon {
	t.Helper()
	return spawnWith(t, state, cmd, (*exec.Cmd).Start, extra...)
}

// spawnWith is spawn with start doing the cmd.Start.
func spawnWith(t *testing.T, state string, cmd *exec.Cmd, start func(*exec.Cmd) error, extra ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, state: state, stderr: &cmdtest.Buffer{}, exited: make(chan struct{}), cmd: cmd}
	d.cmd.Env = env(append([]string{"TT_DEVICE_IDS=0,1", "TT_DEVICE_LOG_DIR=" + state, "TT_DEVICE_KILL_GRACE=2"}, extra...)...)
	d.cmd.Stderr = d.stderr
	if err := start(d.cmd); err != nil {
		t.Fatal(err)
	}
	go func() { d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		d.cmd.Process.Kill()
		<-d.exited
		if t.Failed() {
			t.Logf("queued stderr:\n%s", d.stderr.String())
		}
	})
	return d
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func (d *daemon) queue(card, cwd, cmd string) string {
	d.t.Helper()
	r, err := d.client.Queue(ctx(d.t), api.QueueRequest{Cmd: cmd, Cwd: cwd, DeviceID: card})
	if err != nil {
		d.t.Fatal(err)
	}
	return r.JobID
}

func (d *daemon) waitOutput(id, want string) {
	d.t.Helper()
	var out []byte
	for !strings.Contains(string(out), want) {
		ch, err := d.client.Logs(ctx(d.t), id, api.LogsQuery{Offset: int64(len(out)), Wait: 10 * time.Second})
		if err != nil {
			d.t.Fatal(err)
		}
		out = append(out, ch.Data...)
		if ch.Done && !strings.Contains(string(out), want) {
			d.t.Fatalf("job ended without %q: %q", want, out)
		}
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && len(b) > i+2 && b[i+2] != 'Z'
}

func TestQueued_HelpListsFlagsAndEnvironment(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"--listen", "--state-dir", "--device-ids", "--http-workers", "--allow-non-loopback",
		"TT_DEVICE_IDS", "TT_DEVICE_DEFAULT_TIMEOUT", "TT_DEVICE_MAX_TIMEOUT", "TT_DEVICE_MAX_QUEUED_JOBS",
		"TT_DEVICE_MAX_LOG_BYTES", "TT_DEVICE_RESULT_BYTES", "TT_DEVICE_MAX_REQUEST_BYTES", "TT_DEVICE_HTTP_WORKERS",
		"TT_DEVICE_RETENTION_DAYS", "TT_DEVICE_MAX_COMPLETED_JOBS", "TT_DEVICE_LOG_DIR", "TT_DEVICE_PORT",
		"TT_DEVICE_RESET_CMD", "TT_DEVICE_HEALTH_CHECK_CMD", "TT_DEVICE_DEEP_RESET_CMD", "TT_DEVICE_RESET_TIMEOUT",
		"TT_DEVICE_HEALTH_CHECK_TIMEOUT", "TT_DEVICE_DEEP_RESET_TIMEOUT", "TT_DEVICE_DRIVER_PATH", "TT_DEVICE_WAIT_FOREIGN",
		"--reset-cmd", "--wait-foreign", "--driver-path"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("--help does not mention %s", want)
		}
	}
}

func TestQueued_RefusesBadConfiguration(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"no cards", []string{"--dev-dir", t.TempDir()}, nil, "set TT_DEVICE_IDS"},
		{"bad variable", nil, []string{"TT_DEVICE_IDS=0", "TT_DEVICE_MAX_TIMEOUT=abc"}, `TT_DEVICE_MAX_TIMEOUT="abc"`},
		{"bad card list", nil, []string{"TT_DEVICE_IDS=0,zero"}, `TT_DEVICE_IDS="0,zero"`},
		{"non-loopback", []string{"--listen", "0.0.0.0:0"}, []string{"TT_DEVICE_IDS=0"}, "--allow-non-loopback"},
		{"bad flag", []string{"--http-workers", "many"}, []string{"TT_DEVICE_IDS=0"}, "--http-workers"},
		{"bad daemon CPU", nil, []string{"TT_DEVICE_IDS=0", "TT_DEVICE_DAEMON_CPU=fast"}, `TT_DEVICE_DAEMON_CPU="fast": "fast" is not a CPU's number, auto or any`},
		{"daemon CPU not ours", nil, []string{"TT_DEVICE_IDS=0", "TT_DEVICE_DAEMON_CPU=4000"}, "TT_DEVICE_DAEMON_CPU=4000: CPU 4000 is not one queued may use ("},
	} {
		cmd := exec.Command(bin, tc.args...)
		cmd.Env = env(append(tc.env, "TT_DEVICE_LOG_DIR="+state)...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: %v, output %q; want a failure mentioning %q", tc.name, err, out, tc.want)
		}
	}
}

// TestQueued_KillDashNineAndRestart kills the real daemon with SIGKILL
// while a job runs (with a background child in its process group) and
// others wait, then restarts it: the running job is recorded interrupted
// once and never run again, its leftover process is killed, and the
// queued jobs run in order.
func TestQueued_KillDashNineAndRestart(t *testing.T) {
	t.Parallel()
	state, work := t.TempDir(), t.TempDir()
	d := startDaemon(t, state)
	pidFile := filepath.Join(work, "child")
	running := d.queue("0", work, fmt.Sprintf("echo ran >> runs; sleep 1000 & echo $! > %s; echo started; wait", pidFile))
	var queued []string
	for i := range 3 {
		queued = append(queued, d.queue("0", work, fmt.Sprintf("echo %d >> order", i)))
	}
	d.waitOutput(running, "started")
	b, _ := os.ReadFile(pidFile)
	child, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("child pid %q", b)
	}
	// Let the process record reach the store (it is written after the job
	// has run a moment); recovery must work either way.
	j, _ := d.client.Job(ctx(t), running)
	t.Logf("running job pid %d", j.PID)

	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
	if !alive(child) {
		t.Fatal("the job's child died with the daemon; the test proves nothing")
	}

	d2 := startDaemon(t, state)
	deadline := time.Now().Add(20 * time.Second)
	for alive(child) {
		if time.Now().After(deadline) {
			t.Fatal("leftover child still alive after restart")
		}
		time.Sleep(5 * time.Millisecond) // polling /proc
	}
	res, err := d2.client.WaitResult(ctx(t), running)
	if err != nil || *res.ExitCode != -1 || res.Error != "interrupted by service restart" || res.Outcome != "interrupted" {
		t.Fatalf("interrupted job: %+v, %v", res, err)
	}
	for _, id := range queued {
		if r, err := d2.client.WaitResult(ctx(t), id); err != nil || *r.ExitCode != 0 {
			t.Fatalf("queued job after restart: %+v, %v", r, err)
		}
	}
	if out, _ := os.ReadFile(filepath.Join(work, "order")); string(out) != "0\n1\n2\n" {
		t.Fatalf("order after restart: %q", out)
	}
	// Restarting again runs nothing twice.
	d2.cmd.Process.Signal(syscall.SIGKILL)
	<-d2.exited
	d3 := startDaemon(t, state)
	d3.client.WaitResult(ctx(t), d3.queue("1", work, "true"))
	if out, _ := os.ReadFile(filepath.Join(work, "runs")); string(out) != "ran\n" {
		t.Fatalf("the interrupted job ran %q", out)
	}
	if out, _ := os.ReadFile(filepath.Join(work, "order")); string(out) != "0\n1\n2\n" {
		t.Fatalf("order after second restart: %q", out)
	}
}

// TestQueued_SIGTERM stops the daemon gracefully: it exits 0, the running
// job ends as interrupted by the stop, the queued job stays queued and
// runs after the next start.
func TestQueued_SIGTERM(t *testing.T) {
	t.Parallel()
	state, work := t.TempDir(), t.TempDir()
	d := startDaemon(t, state)
	running := d.queue("0", work, "echo started; sleep 1000")
	queued := d.queue("0", work, "echo later")
	d.waitOutput(running, "started")
	d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.exited
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d\n%s", code, d.stderr.String())
	}
	if _, err := os.Stat(filepath.Join(state, api.AddressFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("address file left behind: %v", err)
	}
	d2 := startDaemon(t, state)
	r, err := d2.client.Job(ctx(t), running)
	if err != nil || *r.ExitCode != -1 || r.Error != "interrupted by service stop" {
		t.Fatalf("running job after stop: %+v, %v", r, err)
	}
	if r, err := d2.client.WaitResult(ctx(t), queued); err != nil || *r.ExitCode != 0 {
		t.Fatalf("queued job after restart: %+v, %v", r, err)
	}
}
