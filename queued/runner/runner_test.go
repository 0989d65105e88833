package runner

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// helperEnv names a queued-exec for every job of these tests to start
// through, instead of this test binary as the Go helper: `make test` runs
// the package a second time with the C build (cmd/queued-exec/start.c),
// so every containment, credential and hostile case holds for both.
const helperEnv = "QUEUED_TEST_EXEC_HELPER"

func TestMain(m *testing.M) {
	ServeExecJob()
	if path := os.Getenv(helperEnv); path != "" {
		h, err := holdHelper(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		defaultHelper = func() helperExec { return h }
	}
	if mode := os.Getenv(hostileEnv); mode != "" {
		os.Exit(hostileMain(mode))
	}
	if list := os.Getenv(ignoringEnv); list != "" {
		os.Exit(ignoringMain(list, os.Getenv(ignoringDirEnv)))
	}
	if dir := os.Getenv(asQueuedEnv); dir != "" {
		os.Exit(asQueuedMain(dir))
	}
	if cpu := os.Getenv(keptEnv); cpu != "" {
		os.Exit(keptMain(cpu))
	}
	goleak.VerifyTestMain(m)
}

type bundle struct {
	dir string
	log *Log
}

func setup(t *testing.T, limit int64) *bundle {
	t.Helper()
	dir := t.TempDir()
	l := NewLog(filepath.Join(dir, "out.log"), limit)
	t.Cleanup(func() { l.Close() })
	return &bundle{dir: dir, log: l}
}

func (b *bundle) spec(cmd string) Spec {
	return Spec{Shell: Shell(), Cmd: cmd, Dir: b.dir, Env: testEnv(), KillGrace: 5 * time.Second}
}

// testEnv is the test's environment without a job marker: run inside a
// queued job, the tests' own marker would make the runner kill the job
// running them as a straggler of theirs.
func testEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, JobEnvVar+"=") {
			env = append(env, kv)
		}
	}
	return env
}

func (b *bundle) output(t *testing.T) string {
	t.Helper()
	return readAll(t, b.log)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitOutput blocks on the log's change notifications until it holds want.
func (b *bundle) waitOutput(t *testing.T, want string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		st := b.log.State()
		if strings.Contains(b.output(t), want) {
			return
		}
		select {
		case <-st.Changed:
		case <-timeout:
			t.Fatalf("output never contained %q: %q", want, b.output(t))
		}
	}
}

func dead(pid int) bool {
	st, err := readStat("/proc", pid)
	return err != nil || st.state == 'Z'
}

func TestRun_ExitCodesAndOutput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd  string
		code int
	}{
		{"echo hello; echo err >&2", 0},
		{"exit 3", 3},
		{"kill -TERM $$", -15},
	} {
		b := setup(t, 1<<20)
		res := Run(b.spec(tc.cmd), b.log, nil)
		if res.ExitCode != tc.code || res.Iterations != 1 || res.Err != nil {
			t.Errorf("%q: %+v, want exit %d", tc.cmd, res, tc.code)
		}
		if tc.code == 0 && b.output(t) != "hello\nerr\n" {
			t.Errorf("output = %q", b.output(t))
		}
	}
}

func TestRun_CwdEnvAndShFallback(t *testing.T) {
	t.Parallel()
	b := setup(t, 1<<20)
	spec := b.spec(`printf '%s|%s' "$PWD" "$FOO"`)
	spec.Shell = []string{"/bin/sh", "-c"}
	spec.Env = []string{"FOO=bar baz", "PATH=/usr/bin:/bin"}
	if res := Run(spec, b.log, nil); res.ExitCode != 0 {
		t.Fatalf("%+v", res)
	}
	if got := b.output(t); got != b.dir+"|bar baz" {
		t.Fatalf("output = %q", got)
	}
}

func TestRun_StartErrorIsMinusOne(t *testing.T) {
	t.Parallel()
	b := setup(t, 1<<20)
	spec := b.spec("true")
	spec.Dir = filepath.Join(b.dir, "gone")
	res := Run(spec, b.log, nil)
	if res.ExitCode != -1 || res.Err == nil || !strings.Contains(res.Err.Error(), "gone") {
		t.Fatalf("%+v", res)
	}
}

func TestRun_TimeoutKillsWholeGroup(t *testing.T) {
	t.Parallel()
	untilStartedInTime(t, 300*time.Millisecond, func(timeout time.Duration) bool {
		b := setup(t, 1<<20)
		spec := b.spec("sleep 1000 & echo $!; wait")
		spec.Timeout = timeout
		var leader Proc
		spec.OnStart = func(p Proc) { leader = p }
		res := Run(spec, b.log, nil)
		out := strings.TrimSpace(b.output(t))
		if out == "" {
			return false // ended before its echo: no child to look for
		}
		if res.ExitCode != -9 || !res.TimedOut {
			t.Fatalf("%+v", res)
		}
		if leader.PID == 0 || leader.Start == 0 {
			t.Fatalf("OnStart got %+v", leader)
		}
		child, err := strconv.Atoi(out)
		if err != nil {
			t.Fatalf("output %q: %v", out, err)
		}
		waitFor(t, "background child to die", func() bool { return dead(child) })
		return true
	})
}

// untilStartedInTime runs a test of a job's timeout with a timeout of
// first, and again with twice the last, up to 16 times first, while try
// reports that the job's program had not yet got as far as the test needs
// (its first output, its escaper's start) when the timeout fired: on a
// machine loaded with a whole suite under the race detector, bash alone
// can take longer than a timeout short enough for a quick test. A program
// that never gets there fails the test.
func untilStartedInTime(t *testing.T, first time.Duration, try func(timeout time.Duration) bool) {
	t.Helper()
	for timeout := first; !try(timeout); timeout *= 2 {
		if timeout >= 16*first {
			t.Fatalf("the job had not got as far as the test needs when its timeout of %v fired, nor in any shorter try", timeout)
		}
		t.Logf("the job had not got as far as the test needs within its timeout of %v; again with %v", timeout, 2*timeout)
	}
}

func TestRun_RepeatStopsAtFirstFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, 1<<20)
	spec := b.spec(`echo x >> count; [ "$(wc -l < count)" -lt 3 ]`)
	spec.Repeat = 5
	res := Run(spec, b.log, nil)
	if res.ExitCode != 1 || res.Iterations != 3 {
		t.Fatalf("%+v", res)
	}
	b2 := setup(t, 1<<20)
	spec = b2.spec("echo run")
	spec.Repeat = 4
	if res := Run(spec, b2.log, nil); res.ExitCode != 0 || res.Iterations != 4 || b2.output(t) != strings.Repeat("run\n", 4) {
		t.Fatalf("%+v %q", res, b2.output(t))
	}
}

func TestRun_StopSendsSIGINTThenTheLadder(t *testing.T) {
	t.Parallel()
	t.Run("interruptible", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 1<<20)
		stop := make(chan struct{})
		spec := b.spec("echo ready; sleep 1000")
		spec.Repeat = 3
		done := make(chan Result)
		go func() { done <- Run(spec, b.log, stop) }()
		b.waitOutput(t, "ready")
		close(stop)
		res := <-done
		if res.ExitCode != -2 || !res.Stopped || res.Iterations != 1 {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("ignores SIGINT", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 1<<20)
		stop := make(chan struct{})
		spec := b.spec("trap '' INT; echo ready; sleep 1000")
		spec.KillGrace, spec.TermGrace = 100*time.Millisecond, time.Minute
		done := make(chan Result)
		go func() { done <- Run(spec, b.log, stop) }()
		b.waitOutput(t, "ready")
		close(stop)
		res := <-done
		if res.ExitCode != -15 || !res.Stopped || res.TimedOut || res.KillSignal != syscall.SIGTERM {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("before start", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 1<<20)
		stop := make(chan struct{})
		close(stop)
		if res := Run(b.spec("echo never"), b.log, stop); res.Iterations != 0 || !res.Stopped || b.output(t) != "" {
			t.Fatalf("%+v", res)
		}
	})
}

// TestLog_CapKeepsHeadAndTail: past the limit, the first and the last
// half of it are kept (the end is where a test runner prints its summary)
// and a marker says how much was cut; offsets mean the same bytes while
// the job runs and after Close.
func TestLog_CapKeepsHeadAndTail(t *testing.T) {
	t.Parallel()
	b := setup(t, 1000)
	res := Run(b.spec("head -c 5000000 /dev/zero; echo the summary"), b.log, nil)
	if res.ExitCode != 0 {
		t.Fatalf("%+v", res)
	}
	const total = 5000000 + 12
	cut := int64(total - 1000)
	marker := CutMarker(cut)
	want := strings.Repeat("\x00", 500) + marker + strings.Repeat("\x00", 488) + "the summary\n"
	st := b.log.State()
	if !st.Truncated || st.Dropped != cut || st.Size != total || st.Layout != (Layout{CutAt: 500, Cut: cut}) {
		t.Fatalf("state = %+v", st)
	}
	if got := b.output(t); got != want {
		t.Fatalf("output while open: %d bytes, want head, marker and tail (%d)", len(got), len(want))
	}
	b.log.Close()
	raw, err := os.ReadFile(b.log.Path())
	if err != nil || string(raw) != want {
		t.Fatalf("file after Close: %d bytes, %v; want head, marker, tail", len(raw), err)
	}
	// The same reads from the file once the log is gone.
	var got strings.Builder
	for off := int64(0); off < total; {
		data, next, size, err := ReadOutput(b.log.Path(), st.Layout, off, 300)
		if err != nil || size != total || next <= off {
			t.Fatalf("ReadOutput at %d: next %d size %d %v", off, next, size, err)
		}
		got.Write(data)
		off = next
	}
	if got.String() != want {
		t.Fatalf("ReadOutput gives %d bytes, want %d", got.Len(), len(want))
	}
	// An offset in the cut part reads the marker and goes on at the tail.
	data, next, _, _ := ReadOutput(b.log.Path(), st.Layout, 4000000, 10)
	if string(data) != marker || next != total-500 {
		t.Fatalf("an offset in the cut part: %q, next %d", data, next)
	}
	if data, _, _, _ := ReadOutput(b.log.Path(), st.Layout, total-12, 100); string(data) != "the summary\n" {
		t.Fatalf("the end: %q", data)
	}
}

// TestLog_ReadWhileCut reads a running log that passed its limit: head
// from the file, the marker for the cut part, the tail from memory.
func TestLog_ReadWhileCut(t *testing.T) {
	t.Parallel()
	l := NewLog(filepath.Join(t.TempDir(), "out"), 10)
	t.Cleanup(func() { l.Close() })
	l.Write([]byte("0123456789abcdefghij"))
	if data, next, size, err := l.Read(0, 100); string(data) != "01234" || next != 5 || size != 20 || err != nil {
		t.Fatalf("head: %q %d %d %v", data, next, size, err)
	}
	if data, next, _, _ := l.Read(5, 100); string(data) != CutMarker(10) || next != 15 {
		t.Fatalf("cut part: %q %d", data, next)
	}
	if data, next, _, _ := l.Read(15, 100); string(data) != "fghij" || next != 20 {
		t.Fatalf("tail: %q %d", data, next)
	}
	l.Write([]byte("KLM"))
	if data, next, size, _ := l.Read(17, 2); string(data) != CutMarker(13) || next != 18 || size != 23 {
		t.Fatalf("the cut part grew past 17: %q %d %d", data, next, size)
	}
	if data, next, _, _ := l.Read(18, 2); string(data) != "ij" || next != 20 {
		t.Fatalf("tail after the ring wrapped: %q %d", data, next)
	}
	if data, _, _, _ := l.Read(18, 100); string(data) != "ijKLM" {
		t.Fatalf("wrapped tail: %q", data)
	}
}

func TestLog_SharedByCommandsAndWakesWaiters(t *testing.T) {
	t.Parallel()
	b := setup(t, 1<<20)
	changed := b.log.State().Changed
	woke := make(chan struct{})
	go func() { <-changed; close(woke) }()
	Run(b.spec("echo first"), b.log, nil)
	<-woke
	Run(b.spec("echo second"), b.log, nil)
	if got := b.output(t); got != "first\nsecond\n" {
		t.Fatalf("output = %q", got)
	}
	last := b.log.State().Changed
	b.log.Close()
	<-last // Close wakes waiters too
	if st := b.log.State(); !st.Closed || st.Size != 13 {
		t.Fatalf("state = %+v", st)
	}
	b.log.Write([]byte("late"))
	if st := b.log.State(); st.Size != 13 || st.Dropped != 4 {
		t.Fatalf("write after close: %+v", st)
	}
	data, next, size, err := ReadOutput(b.log.Path(), Layout{}, 6, 3)
	if err != nil || string(data) != "sec" || size != 13 || next != 9 {
		t.Fatalf("ReadOutput = %q %d %d %v", data, next, size, err)
	}
	if data, _, size, err := ReadOutput(filepath.Join(b.dir, "none"), Layout{}, 0, 10); err != nil || size != 0 || data != nil {
		t.Fatalf("ReadOutput(missing) = %q %d %v", data, size, err)
	}
}

func TestLog_WriteErrorDropsAndRecords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := NewLog(filepath.Join(dir, "out"), 100)
	l.Write([]byte("ab"))
	l.f.Close() // a failing file, as on a broken disk
	l.Write([]byte("abc"))
	st := l.State()
	if st.Err == nil || st.Dropped != 3 || st.Size != 2 {
		t.Fatalf("state = %+v", st)
	}
	l.Close()
	// A file that cannot be created: a directory in its way.
	os.Mkdir(filepath.Join(dir, "dir"), 0o700)
	l = NewLog(filepath.Join(dir, "dir"), 100)
	l.Write([]byte("abc"))
	if st := l.State(); st.Err == nil || st.Dropped != 3 || !strings.Contains(st.Err.Error(), "creating output file") {
		t.Fatalf("state = %+v", st)
	}
	l.Close()
}

// startGroup starts a process group that carries TT_QUEUE_JOB_ID=id and
// whose leader has a child; it returns the leader and the child's PID.
func startGroup(t *testing.T, id string) (*exec.Cmd, int, <-chan struct{}) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("bash", "-c", "sleep 1000 & echo $! > child; wait")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), JobEnvVar+"="+id)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	var child int
	waitFor(t, "child pid", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "child"))
		child, _ = strconv.Atoi(string(bytes.TrimSpace(b)))
		return child > 0
	})
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
	})
	return cmd, child, exited
}

func TestKillLeftovers(t *testing.T) {
	t.Parallel()
	t.Run("recorded group", func(t *testing.T) {
		t.Parallel()
		cmd, child, exited := startGroup(t, "other-id")
		start, err := StartTime("/proc", cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		killed, err := KillLeftovers("/proc", []Leftover{{JobID: "job-a", PGID: cmd.Process.Pid, LeaderStart: start}}, 10*time.Second)
		if err != nil || len(killed) == 0 {
			t.Fatalf("killed %v, %v", killed, err)
		}
		<-exited
		waitFor(t, "child to die", func() bool { return dead(child) })
	})
	t.Run("reused pid spared", func(t *testing.T) {
		t.Parallel()
		cmd, child, exited := startGroup(t, "other-id-2")
		start, _ := StartTime("/proc", cmd.Process.Pid)
		killed, err := KillLeftovers("/proc", []Leftover{{JobID: "job-b", PGID: cmd.Process.Pid, LeaderStart: start + 1}}, 10*time.Second)
		if err != nil || len(killed) != 0 {
			t.Fatalf("killed %v, %v", killed, err)
		}
		select {
		case <-exited:
			t.Fatal("group died")
		default:
		}
		if dead(child) {
			t.Fatal("child died")
		}
	})
	t.Run("found by environment", func(t *testing.T) {
		t.Parallel()
		_, child, exited := startGroup(t, "job-c")
		killed, err := KillLeftovers("/proc", []Leftover{{JobID: "job-c"}}, 10*time.Second)
		if err != nil || len(killed) < 2 {
			t.Fatalf("killed %v, %v", killed, err)
		}
		<-exited
		waitFor(t, "child to die", func() bool { return dead(child) })
	})
}

func TestReadStat_OddCommandName(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "42"), 0o755)
	stat := "42 (a) b (c)) S 1 77 77 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123456 1000 100 18446744073709551615"
	os.WriteFile(filepath.Join(root, "42", "stat"), []byte(stat), 0o644)
	st, err := readStat(root, 42)
	if err != nil || st.state != 'S' || st.pgrp != 77 || st.start != 123456 {
		t.Fatalf("%+v %v", st, err)
	}
	if _, err := readStat(root, 43); err == nil {
		t.Fatal("missing pid read")
	}
}

// readAll reads a log's whole output by offset, as a reader would.
func readAll(t *testing.T, l *Log) string {
	t.Helper()
	var out strings.Builder
	for off := int64(0); ; {
		data, next, size, err := l.Read(off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(data)
		if next >= size || next == off {
			return out.String()
		}
		off = next
	}
}
