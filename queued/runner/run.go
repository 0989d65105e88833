// Package runner runs one shell program for queued: in its own process
// group, with a per-iteration timeout, repeated until the first failure,
// its output drained into a bounded Log, and stoppable with SIGINT then
// SIGKILL. It also finds and kills process groups left behind by a daemon
// that died while a job ran.
package runner

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/ttkit/ttkit/queued/jobcgroup"
)

// drainTimeout bounds how long output is still read after an iteration's
// process group is gone; only a process that left the group (setsid) can
// keep the pipe open that long, and its later output is lost.
const drainTimeout = 2 * time.Second

// Shell returns the interpreter prefix for a program: bash -c, or sh -c
// where bash is missing.
func Shell() []string {
	if p, err := exec.LookPath("bash"); err == nil {
		return []string{p, "-c"}
	}
	return []string{"/bin/sh", "-c"}
}

// Spec describes one program to run.
type Spec struct {
	// Shell is the interpreter prefix, such as {"/usr/bin/bash", "-c"}; the
	// program is its last argument.
	Shell []string
	// Cmd is the shell program.
	Cmd string
	// Dir is the working directory.
	Dir string
	// Env is the complete environment.
	Env []string
	// Timeout bounds each iteration; on expiry the group gets SIGKILL and
	// the exit code is -9. Zero means no timeout.
	Timeout time.Duration
	// Repeat is the number of iterations (less than 1 means 1); the first
	// failing iteration ends the run.
	Repeat int
	// KillGrace is the time between SIGINT and SIGKILL after a stop.
	KillGrace time.Duration
	// OnStart, if set, is called as each iteration's process starts; the
	// scheduler records the process for recovery. It must not block: the
	// timeout and stop are not watched while it runs.
	OnStart func(Proc)
}

// Proc identifies a started iteration: its leader's PID, which is also its
// process group id, and the leader's start time (field 22 of
// /proc/<pid>/stat, clock ticks since boot), which tells it from a later
// process that reuses the PID.
type Proc struct {
	PID   int
	Start uint64
}

// Result is how a run ended.
type Result struct {
	// ExitCode is the last iteration's exit status; a signal N is -N; -9
	// after a timeout; -1 when the program could not be started.
	ExitCode int
	// Iterations counts iterations started.
	Iterations int
	// TimedOut is set when the last iteration hit its timeout.
	TimedOut bool
	// Stopped is set when the stop channel closed during the run.
	Stopped bool
	// Err says why the program could not be started, if it could not.
	Err error
}

// Run runs spec to the end, writing output to out (which it does not
// close). Closing stop sends SIGINT to the current iteration's process
// group, SIGKILL after KillGrace, and starts no further iteration; if stop
// is already closed nothing starts.
func Run(spec Spec, out *Log, stop <-chan struct{}) Result {
	n := max(spec.Repeat, 1)
	var res Result
	for i := 0; i < n; i++ {
		select {
		case <-stop:
			res.Stopped = true
			return res
		default:
		}
		res.Iterations++
		it := runOnce(&spec, out, stop)
		res.ExitCode, res.TimedOut, res.Stopped, res.Err = it.ExitCode, it.TimedOut, it.Stopped, it.Err
		if it.ExitCode != 0 || it.Stopped || it.Err != nil {
			return res
		}
	}
	return res
}

func runOnce(spec *Spec, out *Log, stop <-chan struct{}) Result {
	if len(spec.Shell) == 0 {
		return Result{ExitCode: -1, Err: errors.New("no shell configured")}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return Result{ExitCode: -1, Err: fmt.Errorf("creating output pipe: %w", err)}
	}
	args := append(append([]string(nil), spec.Shell[1:]...), spec.Cmd)
	cmd := exec.Command(spec.Shell[0], args...)
	cmd.Dir = spec.Dir
	cmd.Env = spec.Env
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Where queued's cgroup is delegated, the iteration starts in a cgroup
	// of its own and each SIGKILL below reaches its whole process tree,
	// setsid or not; elsewhere cg is nil and only the group is signalled.
	cg, _ := jobcgroup.Default().New(jobcgroup.NameFromEnv(spec.Env, JobEnvVar))
	cg.Place(cmd.SysProcAttr)
	defer cg.Close()
	killAll := func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cg.Kill() }
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		if _, serr := os.Stat(spec.Dir); serr != nil && spec.Dir != "" {
			err = fmt.Errorf("working directory: %w", serr)
		}
		return Result{ExitCode: -1, Err: fmt.Errorf("starting %s: %w", spec.Shell[0], err)}
	}
	pgid := cmd.Process.Pid
	// Read the start time before anything can reap the child: until then
	// the PID is still its own.
	start, _ := StartTime("/proc", pgid)

	copied := make(chan struct{})
	go func() {
		defer close(copied)
		buf := make([]byte, 32<<10)
		for {
			n, err := pr.Read(buf)
			if n > 0 {
				out.Write(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	waited := make(chan *os.ProcessState, 1)
	go func() {
		cmd.Wait() // the state is all we need; its error only repeats it
		waited <- cmd.ProcessState
	}()

	if spec.OnStart != nil {
		spec.OnStart(Proc{PID: pgid, Start: start})
	}

	var res Result
	var timeout, grace <-chan time.Time
	if spec.Timeout > 0 {
		t := time.NewTimer(spec.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var state *os.ProcessState
	for state == nil {
		select {
		case state = <-waited:
		case <-timeout:
			res.TimedOut = true
			killAll()
		case <-stop:
			res.Stopped = true
			stop = nil
			syscall.Kill(-pgid, syscall.SIGINT)
			t := time.NewTimer(spec.KillGrace)
			defer t.Stop()
			grace = t.C
		case <-grace:
			killAll()
		}
	}
	// Nothing of an iteration outlives its leader: kill what is left of the
	// group, so no stray process holds the card or the output pipe.
	killAll()
	pr.SetReadDeadline(time.Now().Add(drainTimeout))
	<-copied
	pr.Close()

	res.ExitCode = exitCode(state)
	if res.TimedOut {
		res.ExitCode = -int(syscall.SIGKILL)
	}
	return res
}

func exitCode(s *os.ProcessState) int {
	if ws, ok := s.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -int(ws.Signal())
	}
	return s.ExitCode()
}
