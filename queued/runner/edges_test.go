package runner

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRun_StopNeverReadsAsSuccess stops a fast repeating program at once
// from its first iteration's start: whether the stop lands while an
// iteration runs or between two of them, the result is stopped and its
// exit code is never 0 (the previous iteration's success is not the run's).
func TestRun_StopNeverReadsAsSuccess(t *testing.T) {
	t.Parallel()
	for i := range 40 {
		b := setup(t, 1<<20)
		stop := make(chan struct{})
		spec := b.spec("true")
		spec.Repeat = 1000
		n := 0
		spec.OnStart = func(Proc) {
			n++
			if n == 3 {
				close(stop)
			}
		}
		res := Run(spec, b.log, stop)
		if !res.Stopped || res.ExitCode == 0 {
			t.Fatalf("run %d: %+v; a stopped run must not read as exit 0", i, res)
		}
	}
}

// TestRun_StartFailureIsNoIteration: a program that cannot start (its
// working directory vanished) counts no iteration, even with repeat,
// though its process (queued's helper) started and was reported.
func TestRun_StartFailureIsNoIteration(t *testing.T) {
	t.Parallel()
	b := setup(t, 1<<20)
	spec := b.spec("true")
	spec.Repeat = 2
	spec.Dir = filepath.Join(b.dir, "gone")
	started := 0
	spec.OnStart = func(Proc) { started++ }
	res := Run(spec, b.log, nil)
	if res.Iterations != 0 || started != 1 || res.Err == nil || res.ExitCode != -1 {
		t.Fatalf("%+v (OnStart called %d times); want no iteration", res, started)
	}
	// The second iteration failing to start counts only the first.
	dir := filepath.Join(b.dir, "cwd")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	spec = b.spec("rmdir " + dir)
	spec.Dir, spec.Repeat = dir, 3
	if res := Run(spec, b.log, nil); res.Iterations != 1 || res.Err == nil {
		t.Fatalf("%+v; want 1 iteration then a start failure", res)
	}
}

// TestRun_ProgramStartingWithDash runs a program whose first word begins
// with "-" as the program, not as options of the shell.
func TestRun_ProgramStartingWithDash(t *testing.T) {
	t.Parallel()
	b := setup(t, 1<<20)
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "-hello"), []byte("#!/bin/sh\necho hello from dash\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, shell := range [][]string{Shell(), {"/bin/sh", "-c", "--"}} {
		spec := b.spec("-hello")
		spec.Shell = shell
		spec.Env = append(os.Environ(), "PATH="+bin+":/usr/bin:/bin")
		if res := Run(spec, b.log, nil); res.ExitCode != 0 {
			t.Fatalf("%v: %+v, output %q", shell, res, b.output(t))
		}
	}
	if got := b.output(t); got != strings.Repeat("hello from dash\n", 2) {
		t.Fatalf("output %q", got)
	}
	res := Run(b.spec("--version"), b.log, nil)
	if res.ExitCode != 127 {
		t.Fatalf("--version ran as %+v; want the shell's 127 for a missing program", res)
	}
}

// TestWaitExited_LeavesTheLeaderUnreaped: waitExited reports the leader's
// exit without reaping it, so its PID, and with it the process group id,
// cannot be reused while the group is killed.
func TestWaitExited_LeavesTheLeaderUnreaped(t *testing.T) {
	t.Parallel()
	b := setup(t, 1<<20)
	spec := b.spec("sleep 1000 & echo $!")
	var leader Proc
	spec.OnStart = func(p Proc) { leader = p }
	// Run it by hand: start, wait without reaping, check, kill, reap.
	p, err := start(&spec, b.log, false)
	if err != nil {
		t.Fatal(err)
	}
	p.handOff.release()
	leader = p.proc
	if err := waitExited(leader.PID); err != nil {
		t.Fatal(err)
	}
	st, err := readStat("/proc", leader.PID)
	if err != nil || st.state != 'Z' {
		t.Fatalf("leader after waitExited: %+v, %v; want an unreaped zombie", st, err)
	}
	b.waitOutput(t, "\n")
	child, err := strconv.Atoi(strings.TrimSpace(b.output(t)))
	if err != nil {
		t.Fatalf("child pid %q", b.output(t))
	}
	if err := syscall.Kill(-leader.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.finish()
	waitFor(t, "background child to die", func() bool { return dead(child) })
	if _, err := readStat("/proc", leader.PID); err == nil {
		if st, _ := readStat("/proc", leader.PID); st.start == leader.Start {
			t.Fatal("leader still not reaped after finish")
		}
	}
}

// TestWaitExited_HoldsNoThreadWhileItWaits: a wait for a job's leader
// parks in Go's poller on the leader's pidfd; it does not block a thread
// in a system call for the whole of the job (issue 41: a thread held in
// waitid keeps the runtime's monitor awake as long as any job runs). Each
// wait still ends when its process exits and leaves it unreaped, and so
// does the blocking wait kept for kernels without pidfds.
func TestWaitExited_HoldsNoThreadWhileItWaits(t *testing.T) {
	t.Parallel()
	const n = 8
	cmds := make([]*exec.Cmd, n)
	for i := range cmds {
		cmds[i] = exec.Command("sleep", "1000")
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	})
	errs := make(chan error, n)
	for i, c := range cmds {
		wait := waitExited
		if i == n-1 {
			wait = waitExitedBlocking
		}
		go func() { errs <- wait(c.Process.Pid) }()
	}
	// Every poller wait parks as "IO wait"; one in waitid shows "syscall".
	waitFor(t, "the waits to park in the poller", func() bool { return parkedIn("waitExited(", "IO wait") == n-1 })
	for _, c := range cmds {
		if err := c.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a wait did not end when its process was killed")
		}
	}
	for _, c := range cmds {
		if st, err := readStat("/proc", c.Process.Pid); err != nil || st.state != 'Z' {
			t.Fatalf("pid %d after its wait: %+v, %v; want an unreaped zombie", c.Process.Pid, st, err)
		}
	}
}

// TestWaitExited_NamesAProcessNotOurs: a wait for a process that is not
// queued's child fails and names it, with or without a pidfd.
func TestWaitExited_NamesAProcessNotOurs(t *testing.T) {
	t.Parallel()
	for name, wait := range map[string]func(int) error{"pidfd": waitExited, "blocking": waitExitedBlocking} {
		err := wait(1)
		if !errors.Is(err, syscall.ECHILD) || !strings.Contains(err.Error(), "pid 1") {
			t.Errorf("%s: waiting for pid 1 gave %v; want ECHILD naming pid 1", name, err)
		}
	}
}

// parkedIn counts the goroutines whose stack holds fn and whose state is
// state.
func parkedIn(fn, state string) int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		head, _, _ := strings.Cut(g, "\n")
		if strings.Contains(g, fn) && strings.Contains(head, "["+state) {
			count++
		}
	}
	return count
}
