// Package runner runs one shell program for queued: in its own process
// group (and its own cgroup where queued's cgroup is delegated, see
// package jobcgroup), with a per-iteration timeout, repeated until the first failure,
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

	"golang.org/x/sys/unix"

	"github.com/ttkit/ttkit/queued/account"
	"github.com/ttkit/ttkit/queued/jobcgroup"
)

// drainTimeout bounds how long output is still read after an iteration's
// process group is gone; only a process that left the group (setsid) can
// keep the pipe open that long, and its later output is lost.
const drainTimeout = 2 * time.Second

// Shell returns the interpreter prefix for a program: bash -c, or sh -c
// where bash is missing. The "--" ends the shell's options, so a program
// that begins with "-" (such as "-x" or "--version") runs as the program.
func Shell() []string {
	if p, err := exec.LookPath("bash"); err == nil {
		return []string{p, "-c", "--"}
	}
	return []string{"/bin/sh", "-c", "--"}
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
	// Account, when set, is the user the program runs as (system mode):
	// its uid, primary gid and supplementary groups are set in the child
	// before it enters Dir or runs anything, and it gets a session keyring
	// of its own (see startInOwnSession). Nil runs it as queued's own
	// user.
	Account *account.Account
	// Timeout bounds each iteration; on expiry the group gets SIGKILL and
	// the exit code is -9. Zero means no timeout.
	Timeout time.Duration
	// Repeat is the number of iterations (less than 1 means 1); the first
	// failing iteration ends the run.
	Repeat int
	// KillGrace is the time between SIGINT and SIGKILL after a stop.
	KillGrace time.Duration
	// TasksMax, when above 0, caps each iteration at that many processes
	// and threads (pids.max of its cgroup), where it has a cgroup of its
	// own (see package jobcgroup); elsewhere it is not enforced.
	TasksMax int
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
	// after a timeout; -1 when the program could not be started, or when
	// the stop came between two iterations (no process was running).
	ExitCode int
	// Iterations counts iterations whose process started; a program that
	// could not be started is no iteration.
	Iterations int
	// TimedOut is set when the last iteration hit its timeout.
	TimedOut bool
	// Stopped is set when the stop channel closed during the run; a
	// stopped run's ExitCode is never 0 (-1 when its last iteration exited
	// 0 as the stop came).
	Stopped bool
	// Err says why the program could not be started, if it could not.
	Err error
}

// Run runs spec to the end, writing output to out (which it does not
// close). Closing stop sends SIGINT to the current iteration's process
// group, SIGKILL after KillGrace, and starts no further iteration; if stop
// is already closed nothing starts. A stop noticed between two iterations
// ends the run with exit code -1: the previous iteration's status is not
// the run's.
func Run(spec Spec, out *Log, stop <-chan struct{}) Result {
	n := max(spec.Repeat, 1)
	var res Result
	for i := 0; i < n; i++ {
		select {
		case <-stop:
			res.Stopped, res.ExitCode, res.TimedOut = true, -1, false
			return res
		default:
		}
		it, started := runOnce(&spec, out, stop)
		if started {
			res.Iterations++
		}
		res.ExitCode, res.TimedOut, res.Stopped, res.Err = it.ExitCode, it.TimedOut, it.Stopped, it.Err
		if it.ExitCode != 0 || it.Stopped || it.Err != nil {
			return res
		}
	}
	return res
}

// running is a started iteration: its command, the read end of its output
// pipe and the goroutine draining it.
type running struct {
	cmd    *exec.Cmd
	pr     *os.File
	proc   Proc
	copied chan struct{}
	cg     *jobcgroup.Job // nil where queued's cgroup is not delegated
}

// killAll sends SIGKILL to the iteration's process group and, where it
// has one, its whole cgroup (setsid or not). Call it only before the
// leader is reaped.
func (r *running) killAll() {
	syscall.Kill(-r.proc.PID, syscall.SIGKILL)
	r.cg.Kill()
}

// start starts one iteration in its own process group, draining its output
// into out.
func start(spec *Spec, out *Log) (*running, error) {
	if len(spec.Shell) == 0 {
		return nil, errors.New("no shell configured")
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating output pipe: %w", err)
	}
	args := append(append([]string(nil), spec.Shell[1:]...), spec.Cmd)
	cmd := exec.Command(spec.Shell[0], args...)
	cmd.Dir = spec.Dir
	cmd.Env = spec.Env
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if spec.Account != nil {
		cmd.SysProcAttr.Credential = spec.Account.Credential()
	}
	// Where queued's cgroup is delegated, the iteration starts in a cgroup
	// of its own, so a kill reaches its whole process tree (setsid or not)
	// and the OOM killer's victim is the job, not the queue; elsewhere cg
	// is nil and only the process group is signalled.
	cg, _ := jobcgroup.Default().New(jobcgroup.NameFromEnv(spec.Env, JobEnvVar))
	if spec.TasksMax > 0 {
		if err := cg.LimitTasks(spec.TasksMax); err != nil && !errors.Is(err, jobcgroup.ErrNoController) {
			cg.Close()
			pr.Close()
			pw.Close()
			return nil, fmt.Errorf("limiting the job to %d tasks: %w", spec.TasksMax, err)
		}
	}
	cg.Place(cmd.SysProcAttr)
	if spec.Account != nil {
		err = startInOwnSession(cmd)
	} else {
		err = cmd.Start()
	}
	pw.Close()
	if err != nil {
		cg.Close()
		pr.Close()
		return nil, startError(spec, err)
	}
	pid := cmd.Process.Pid
	// Read the start time before anything can reap the child: until then
	// the PID is still its own.
	st, _ := StartTime("/proc", pid)
	r := &running{cmd: cmd, pr: pr, proc: Proc{PID: pid, Start: st}, copied: make(chan struct{}), cg: cg}
	go func() {
		defer close(r.copied)
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
	return r, nil
}

// startError says why the shell could not be started. The kernel's
// answer names the shell even when entering the working directory failed
// (the child changes its user, then enters the directory, then runs the
// shell), so a directory that is missing, or that the job's user cannot
// enter, is told apart here: for a job of queued's own user by a look at
// the directory; for another user's by starting the shell as that user
// outside it, and then the kernel's answer is the user's view (queued,
// as root, would tell them which of the paths they cannot search exist).
func startError(spec *Spec, err error) error {
	switch a := spec.Account; {
	case spec.Dir == "":
	case a == nil:
		if _, serr := os.Stat(spec.Dir); serr != nil {
			return fmt.Errorf("working directory: %w", serr)
		}
	case shellStartsAs(spec, "/"):
		var errno syscall.Errno
		if !errors.As(err, &errno) {
			errno = syscall.EACCES
		}
		return fmt.Errorf("working directory %s: %w for user %s (uid %d)", spec.Dir, errno, a.Name, a.UID)
	}
	if a := spec.Account; a != nil {
		return fmt.Errorf("starting %s as user %s (uid %d): %w", spec.Shell[0], a.Name, a.UID, err)
	}
	return fmt.Errorf("starting %s: %w", spec.Shell[0], err)
}

// shellStartsAs reports whether the shell starts as spec's user in dir.
func shellStartsAs(spec *Spec, dir string) bool {
	probe := exec.Command(spec.Shell[0], "-c", "exit 0")
	probe.Dir = dir
	probe.Env = []string{"PATH=/usr/bin:/bin"}
	probe.SysProcAttr = &syscall.SysProcAttr{Credential: spec.Account.Credential()}
	return probe.Run() == nil
}

// finish reaps the leader and drains what is left of the output.
func (r *running) finish() *os.ProcessState {
	r.cmd.Wait() // the state is all we need; its error only repeats it
	r.pr.SetReadDeadline(time.Now().Add(drainTimeout))
	<-r.copied
	r.pr.Close()
	r.cg.Close()
	return r.cmd.ProcessState
}

// waitExited blocks until the process pid (a child of ours) has exited,
// WITHOUT reaping it: until it is reaped its PID, and so its process group
// id, cannot be taken by another process, which makes a signal to the
// group safe.
func waitExited(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EINTR) {
			return fmt.Errorf("waiting for pid %d: %w", pid, err)
		}
	}
}

// runOnce runs one iteration; started is false when its process could not
// be started. Every signal to the process group is sent while the leader
// is not yet reaped (see waitExited), so none can reach a group that
// reused its id.
func runOnce(spec *Spec, out *Log, stop <-chan struct{}) (res Result, started bool) {
	r, err := start(spec, out)
	if err != nil {
		return Result{ExitCode: -1, Err: err}, false
	}
	pgid := r.proc.PID
	if spec.OnStart != nil {
		spec.OnStart(r.proc)
	}
	exited := make(chan error, 1)
	go func() { exited <- waitExited(pgid) }()

	var timeout, grace <-chan time.Time
	if spec.Timeout > 0 {
		t := time.NewTimer(spec.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var waitErr error
	for done := false; !done; {
		select {
		case waitErr = <-exited:
			done = true
		case <-timeout:
			res.TimedOut = true
			r.killAll()
		case <-stop:
			res.Stopped = true
			stop = nil
			syscall.Kill(-pgid, syscall.SIGINT)
			t := time.NewTimer(spec.KillGrace)
			defer t.Stop()
			grace = t.C
		case <-grace:
			r.killAll()
		}
	}
	// Nothing of an iteration outlives its leader: kill what is left of the
	// group, so no stray process holds the card or the output pipe. The
	// leader is a zombie until finish reaps it, so the id is still ours;
	// the job's cgroup, where there is one, takes what left the group.
	if waitErr == nil {
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
	r.cg.Kill()
	state := r.finish()

	res.ExitCode = exitCode(state)
	switch {
	case res.TimedOut:
		res.ExitCode = -int(syscall.SIGKILL)
	case res.Stopped && res.ExitCode == 0:
		// It exited by itself as the stop came: a stopped run never reads
		// as success.
		res.ExitCode = -1
	}
	return res, true
}

func exitCode(s *os.ProcessState) int {
	if ws, ok := s.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -int(ws.Signal())
	}
	return s.ExitCode()
}
