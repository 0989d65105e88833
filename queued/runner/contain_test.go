package runner

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ttkit/ttkit/internal/fusetest"
)

// hostileEnv makes the test binary one of the hostile job programs below
// instead of running tests: a job's shell execs it with this variable set
// in the job's environment.
const hostileEnv = "RUNNER_TEST_HOSTILE"

// hostileMain is a job program that tries to get out of its box. Modes:
//
//	session   print "pid=P sid=S tty=<error or ok>" and exit
//	setpgid   ignore SIGINT, join the process group in RUNNER_TEST_PGID, print the result, sleep
//	orphan    start a copy of itself in a new session (mode sleep), print its pid, exit 0
//	sleep     sleep for an hour
//	pidsleep  write its pid to RUNNER_TEST_PIDFILE, then sleep
func hostileMain(mode string) int {
	switch mode {
	case "session":
		sid, _ := unix.Getsid(0)
		tty := "ok"
		if f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0); err != nil {
			tty = err.Error()
		} else {
			f.Close()
		}
		fmt.Printf("pid=%d sid=%d tty=%s\n", os.Getpid(), sid, tty)
		return 0
	case "setpgid":
		signal.Ignore(syscall.SIGINT)
		pgid, _ := strconv.Atoi(os.Getenv("RUNNER_TEST_PGID"))
		err := syscall.Setpgid(0, pgid)
		fmt.Printf("pid=%d setpgid=%v\n", os.Getpid(), err)
		time.Sleep(time.Hour)
		return 0
	case "orphan":
		self, _ := os.Executable()
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), hostileEnv+"=sleep")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			fmt.Println("start:", err)
			return 1
		}
		fmt.Printf("orphan=%d\n", cmd.Process.Pid)
		return 0
	case "pidsleep":
		os.WriteFile(os.Getenv("RUNNER_TEST_PIDFILE"), []byte(strconv.Itoa(os.Getpid())), 0o644)
		fallthrough
	case "sleep":
		signal.Ignore(syscall.SIGINT, syscall.SIGHUP)
		time.Sleep(time.Hour)
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown hostile mode", mode)
	return 2
}

// hostileSpec is a spec whose job execs this test binary in mode.
func (b *bundle) hostileSpec(t *testing.T, mode string, env ...string) Spec {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	spec := b.spec("exec " + self)
	marker := fmt.Sprintf("hostile-%s-%d-%d", mode, os.Getpid(), hostileJobs.Add(1))
	spec.Env = append(append(testEnv(), hostileEnv+"="+mode, JobEnvVar+"="+marker), env...)
	return spec
}

// hostileJobs numbers the hostile jobs, so that each has a marker of its
// own, as each of queued's jobs has: with one marker for every job of a
// mode, the sweep after one test's job killed the job of another test
// running beside it (one started later, carrying the same marker).
var hostileJobs atomic.Int64

// field returns the value of name=... in out.
func field(t *testing.T, out, name string) string {
	t.Helper()
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v
		}
	}
	t.Fatalf("no %s= in output %q", name, out)
	return ""
}

// runAsync runs spec in the background; the result arrives on the channel.
func runAsync(spec Spec, b *bundle, stop <-chan struct{}) <-chan Result {
	done := make(chan Result, 1)
	go func() { done <- Run(spec, b.log, stop) }()
	return done
}

// within waits for a run to end, failing the test (after unblock, so
// nothing is left behind) when it does not end in time.
func within(t *testing.T, done <-chan Result, d time.Duration, unblock func(), what string) Result {
	t.Helper()
	select {
	case res := <-done:
		return res
	case <-time.After(d):
		unblock()
		<-done
		t.Fatalf("%s: the run did not end within %s", what, d)
		return Result{}
	}
}

// killer kills pid.
func killer(pid int) func() { return func() { syscall.Kill(pid, syscall.SIGKILL) } }

// Every job is a session leader with no controlling terminal: it cannot
// reach the terminal queued was started from (TIOCSTI) nor the process
// groups of queued's session.
func TestRun_JobRunsInASessionOfItsOwn(t *testing.T) {
	t.Parallel()
	b := setup(t, 1<<20)
	res := Run(b.hostileSpec(t, "session"), b.log, nil)
	out := b.output(t)
	if res.ExitCode != 0 {
		t.Fatalf("%+v: %s", res, out)
	}
	if pid, sid := field(t, out, "pid"), field(t, out, "sid"); pid != sid {
		t.Errorf("the job (pid %s) runs in session %s, not a session of its own", pid, sid)
	}
	if !strings.Contains(out, "tty=open /dev/tty") {
		t.Errorf("the job could open a controlling terminal: %s", out)
	}
}

// A job that moves itself into another process group of queued's session
// (queued's own) and ignores SIGINT is still ended by a stop: the move is
// refused (it is in a session of its own), and the leader is killed by its
// pidfd whatever group it is in.
func TestRun_JobThatJoinsAnotherGroupIsStillStopped(t *testing.T) {
	t.Parallel()
	b := setup(t, 1<<20)
	spec := b.hostileSpec(t, "setpgid", "RUNNER_TEST_PGID="+strconv.Itoa(syscall.Getpgrp()))
	spec.KillGrace = 200 * time.Millisecond
	stop := make(chan struct{})
	done := runAsync(spec, b, stop)
	b.waitOutput(t, "setpgid=")
	pid, _ := strconv.Atoi(field(t, b.output(t), "pid"))
	close(stop)
	res := within(t, done, 10*time.Second, killer(pid), "stopping a job that left its process group")
	if !res.Stopped || res.ExitCode != -15 && res.ExitCode != -9 {
		t.Errorf("%+v, want stopped by the ladder's SIGTERM or SIGKILL", res)
	}
	if !dead(pid) {
		t.Errorf("pid %d outlived its job", pid)
	}
}

// The same job under a timeout: the timeout ends it. The timeout leaves
// the job (this test binary, built with the race detector, started
// beside the package's other parallel tests) time to start and leave its
// group first: at 500 ms it sometimes had not printed yet when the
// timeout ended it.
func TestRun_TimeoutEndsAJobThatLeftItsGroup(t *testing.T) {
	t.Parallel()
	b := setup(t, 1<<20)
	spec := b.hostileSpec(t, "setpgid", "RUNNER_TEST_PGID="+strconv.Itoa(syscall.Getpgrp()))
	spec.Timeout = 5 * time.Second
	done := runAsync(spec, b, nil)
	b.waitOutput(t, "setpgid=")
	pid, _ := strconv.Atoi(field(t, b.output(t), "pid"))
	res := within(t, done, 20*time.Second, killer(pid), "timing out a job that left its process group")
	if !res.TimedOut || res.ExitCode != -9 {
		t.Errorf("%+v, want a timeout", res)
	}
}

// A process a job left behind in a session of its own (a daemon it
// started) is found by the job's marker and killed when the job ends, so
// it cannot hold the card after its job.
func TestRun_StragglerInANewSessionDiesWithItsJob(t *testing.T) {
	t.Parallel()
	b := setup(t, 1<<20)
	res := Run(b.hostileSpec(t, "orphan"), b.log, nil)
	out := b.output(t)
	if res.ExitCode != 0 {
		t.Fatalf("%+v: %s", res, out)
	}
	orphan, _ := strconv.Atoi(field(t, out, "orphan"))
	t.Cleanup(func() { syscall.Kill(orphan, syscall.SIGKILL) })
	deadline := time.Now().Add(30 * time.Second)
	for !dead(orphan) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d, started by the job in a session of its own, outlived the job", orphan)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A descriptor queued inherited without close-on-exec (a wrapper's
// `9</etc/shadow`) never reaches a job.
func TestRun_InheritedDescriptorDoesNotReachTheJob(t *testing.T) {
	t.Parallel()
	b := setup(t, 1<<20)
	secret := filepath.Join(b.dir, "secret")
	if err := os.WriteFile(secret, []byte("hunter2"), 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(secret, syscall.O_RDONLY, 0) // no O_CLOEXEC: as inherited
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	res := Run(b.spec(fmt.Sprintf("{ cat <&%d; } 2>/dev/null || echo closed", fd)), b.log, nil)
	if out := b.output(t); res.ExitCode != 0 || out != "closed\n" {
		t.Fatalf("%+v: the job read descriptor %d: %q", res, fd, out)
	}
}

// The timeout bounds the whole job, every repeat together, as the Python
// tool's does: ten iterations of 300 ms each under a 2 s timeout never
// reach the tenth (each alone is far below it).
func TestRun_TimeoutBoundsEveryIterationTogether(t *testing.T) {
	t.Parallel()
	b := setup(t, 1<<20)
	spec := b.spec("sleep 0.3")
	spec.Repeat, spec.Timeout = 10, 2*time.Second
	res := Run(spec, b.log, nil)
	if !res.TimedOut || res.ExitCode != -9 || res.Iterations < 2 || res.Iterations > 7 {
		t.Fatalf("%+v, want a timeout after a few iterations", res)
	}
}

// A working directory that never answers cannot wedge a card: the job's
// timeout and a stop still end it, though the process never got as far as
// running the program.
func TestRun_WorkingDirectoryThatHangs(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		b := setup(t, 1<<20)
		spec := b.spec("echo never")
		var abort func()
		spec.Dir, abort = fusetest.HangingDir(t)
		spec.Timeout = 500 * time.Millisecond
		spec.Notes = true
		res := within(t, runAsync(spec, b, nil), 10*time.Second, abort, "a job whose working directory hangs, with a timeout")
		if res.ExitCode != -9 || !res.TimedOut || res.Iterations != 0 {
			t.Errorf("%+v, want a timeout before the program started", res)
		}
		// Only queued's helper ran: SIGKILL at once, and the note says so.
		if out := b.output(t); !strings.Contains(out, "Command timed out after 0.5s; the queue sent SIGKILL.\n") {
			t.Errorf("the timeout note of a start that never finished: %q", out)
		}
	})
	t.Run("stop", func(t *testing.T) {
		b := setup(t, 1<<20)
		spec := b.spec("echo never")
		var abort func()
		spec.Dir, abort = fusetest.HangingDir(t)
		spec.KillGrace = 100 * time.Millisecond
		stop := make(chan struct{})
		done := runAsync(spec, b, stop)
		time.AfterFunc(200*time.Millisecond, func() { close(stop) })
		res := within(t, done, 10*time.Second, abort, "stopping a job whose working directory hangs")
		if !res.Stopped || res.Iterations != 0 {
			t.Errorf("%+v, want stopped before the program started", res)
		}
	})
}

// The exec helper runs as root until it drops to the job's user: a root
// queued takes only a regular executable that root alone may write.
func TestCheckHelper(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if p, err := CheckHelper(good); err != nil || p != good {
		t.Errorf("a regular executable: %q, %v", p, err)
	}
	link := filepath.Join(dir, "link")
	os.Symlink(good, link)
	if p, err := CheckHelper(link); err != nil || p != good {
		t.Errorf("a link to it: %q, %v", p, err)
	}
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, nil, 0o644)
	if _, err := CheckHelper(plain); err == nil {
		t.Error("a file no one may execute was taken")
	}
	if _, err := CheckHelper(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file was taken")
	}
	if os.Geteuid() == 0 {
		open := filepath.Join(dir, "open")
		os.WriteFile(open, nil, 0o755)
		os.Chmod(open, 0o777)
		if _, err := CheckHelper(open); err == nil || !strings.Contains(err.Error(), "root alone") {
			t.Errorf("a helper others may write, for a root queued: %v", err)
		}
	}
}
