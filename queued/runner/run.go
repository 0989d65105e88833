// Package runner runs one shell program for queued: in a session of its
// own (and its own cgroup where queued's cgroup is delegated, see package
// jobcgroup), started through the exec helper (see helper.go) so that a
// start that blocks can still be timed out and stopped, with a timeout
// over all its iterations, repeated until the first failure, its output
// drained into a bounded Log, and stopped by the kill ladder (SIGINT,
// SIGTERM, SIGKILL; see ladder.go), when stopped, timed out, or silent
// for its idle timeout. When
// an iteration ends, whatever it left behind (its process group, its
// session, processes carrying its job marker) is killed. It also finds and
// kills what a daemon that died while a job ran left behind.
package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	rtrace "runtime/trace"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ttkit/ttkit/queued/jobcgroup"
)

// drainTimeout bounds how long output is still read after an iteration's
// processes are gone; only a process that escaped every kill can keep the
// pipe open that long, and its later output is lost.
const drainTimeout = 2 * time.Second

// DefaultStartTimeout bounds the start of an iteration, from the helper's
// start to the execve of the shell: the switch to the user and entering
// the working directory, which on a network or FUSE mount that stopped
// answering would otherwise never end.
const DefaultStartTimeout = 30 * time.Second

// ErrStartHung means an iteration's start did not finish within its bound.
var ErrStartHung = errors.New("did not finish")

// Shell returns the interpreter prefix for a program: bash -c, or sh -c
// where bash is missing. The "--" ends the shell's options, so a program
// that begins with "-" (such as "-x" or "--version") runs as the program.
func Shell() []string {
	if p, err := exec.LookPath("bash"); err == nil {
		return []string{p, "-c", "--"}
	}
	return []string{"/bin/sh", "-c", "--"}
}

// LoginShell returns the prefix of a login shell, bash -lc, for hosts
// whose users set their toolchain up in ~/.profile
// (TT_DEVICE_LOGIN_SHELL). It fails without bash: sh -l reads a
// different profile, and a job would silently miss what it expects.
func LoginShell() ([]string, error) {
	p, err := exec.LookPath("bash")
	if err != nil {
		return nil, fmt.Errorf("a login shell (TT_DEVICE_LOGIN_SHELL) needs bash: %w", err)
	}
	return []string{p, "-l", "-c", "--"}, nil
}

// Run runs spec to the end, writing output to out (which it does not
// close). Closing stop climbs the kill ladder on the current iteration's
// process group (SIGINT, SIGTERM after KillGrace, SIGKILL after
// TermGrace), and starts no further iteration; if stop
// is already closed nothing starts. A stop noticed between two iterations
// ends the run with exit code -1: the previous iteration's status is not
// the run's.
func Run(spec Spec, out *Log, stop <-chan struct{}) Result {
	defer spec.Prepared.Cancel() // a run that starts nothing
	n := max(spec.Repeat, 1)
	var deadline time.Time
	if spec.Timeout > 0 {
		deadline = time.Now().Add(spec.Timeout)
	}
	var res Result
	for i := 0; i < n; i++ {
		select {
		case <-stop:
			res.Stopped, res.ExitCode, res.TimedOut = true, -1, false
			return res
		default:
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			// The time ran out with the previous iteration.
			res.TimedOut, res.ExitCode = true, -int(syscall.SIGKILL)
			break
		}
		if spec.Notes && n > 1 {
			fmt.Fprintf(out, "\n[tt-device-queue] Repeat %d/%d\n", i+1, n)
		}
		it, started := runOnce(&spec, out, stop, deadline, i == n-1)
		if started {
			res.Iterations++
		}
		res.ExitCode, res.TimedOut, res.Stopped, res.Err = it.ExitCode, it.TimedOut, it.Stopped, it.Err
		res.Abandoned, res.Hung, res.KillSignal, res.killText = it.Abandoned, it.Hung, it.KillSignal, it.killText
		res.Settled = it.Settled
		if it.ExitCode != 0 || it.Stopped || it.Err != nil || it.TimedOut || it.Abandoned != nil || it.Hung {
			break
		}
	}
	if res.TimedOut && spec.Notes {
		fmt.Fprintf(out, "\n[tt-device-queue] Command timed out after %ss; the queue sent %s.\n",
			strconv.FormatFloat(spec.Timeout.Seconds(), 'f', -1, 64), res.killNote())
	}
	if res.Hung && spec.Notes {
		fmt.Fprintf(out, "\n[tt-device-queue] Command wrote no output for %ss (its idle timeout); the queue sent %s.\n",
			strconv.FormatFloat(spec.IdleTimeout.Seconds(), 'f', -1, 64), res.killNote())
	}
	return res
}

// running is a started iteration: its helper (the program, once the
// helper has executed it), the read end of its output pipe and the
// goroutine draining it, and the helper's progress.
type running struct {
	cmd    *exec.Cmd
	pr     *os.File
	proc   Proc
	copied chan struct{}
	cg     *jobcgroup.Job // nil where queued's cgroup is not delegated
	marker string         // the job's TT_QUEUE_JOB_ID, "" for none
	uid    uint32         // the user it runs as: its marker takes only this user's processes
	start  *startWatch
	// clock is the kernel's PID counters read before the start, which
	// bound the PIDs the sweep looks at (see pidwindow.go).
	clock pidClock
	// handOff delivers the helper's request and its Go byte.
	handOff *handOff
	// lastOut is when the iteration last wrote output (Unix nanoseconds,
	// 0 for never), for the idle timeout.
	lastOut atomic.Int64
}

// lastOutput is when the iteration last wrote output; zero for never.
func (r *running) lastOutput() time.Time {
	if n := r.lastOut.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// killAll sends SIGKILL to the iteration's leader (through its pidfd),
// its process group and, where it has one, its whole cgroup. Call it only
// before the leader is reaped.
func (r *running) killAll() {
	r.cmd.Process.Signal(syscall.SIGKILL)
	syscall.Kill(-r.proc.PID, syscall.SIGKILL)
	r.cg.Kill()
}

// killLeftovers kills what is left of the iteration: its process group,
// and what its cgroup holds or, without one, what the sweep finds. Call
// it only before the leader is reaped (its ids are still its own).
func (r *running) killLeftovers() {
	syscall.Kill(-r.proc.PID, syscall.SIGKILL)
	if r.cg == nil {
		r.sweep()
	}
	r.cg.Kill()
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
// and session ids, cannot be taken by another process, which makes a
// signal to the group, and a kill by session, safe.
//
// It waits on the process's pidfd through Go's poller, not in a waitid
// that blocks: a goroutine blocked in a system call holds its thread and
// its P for the whole of a job, so the runtime's monitor never finds
// every P idle and wakes every 20 µs to 10 ms for as long as any job
// runs, and each job's end wakes a parked thread (issue 41: about 6% of
// queued's CPU in a drain). Where no pidfd can be had (a kernel before
// 5.10, or no descriptor left) it blocks as before.
func waitExited(pid int) error {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return waitExitedBlocking(pid)
	}
	f := os.NewFile(uintptr(fd), "pidfd "+strconv.Itoa(pid)) // non-blocking: the poller holds it
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return waitExitedBlocking(pid)
	}
	var werr error
	// A pidfd reads ready once its process has exited; each wake looks
	// without waiting and without reaping.
	err = rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		if err := ignoringEINTR(func() error {
			return unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		}); err != nil {
			werr = fmt.Errorf("waiting for pid %d: %w", pid, err)
			return true
		}
		return info.Signo != 0 // zero: not exited yet
	})
	if err != nil {
		// The poller would not hold the pidfd (not pollable here).
		return waitExitedBlocking(pid)
	}
	return werr
}

// waitExitedBlocking is waitExited in a waitid that blocks.
func waitExitedBlocking(pid int) error {
	var info unix.Siginfo
	if err := ignoringEINTR(func() error { return unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil) }); err != nil {
		return fmt.Errorf("waiting for pid %d: %w", pid, err)
	}
	return nil
}

// ignoringEINTR calls f again while it is interrupted.
func ignoringEINTR(f func() error) error {
	for {
		if err := f(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// runOnce runs one iteration; started is false when its program did not
// start (the helper failed, or was stopped or timed out first). Every
// signal to the process group is sent while the leader is not yet reaped
// (see waitExited), so none can reach a group that reused its id.
func runOnce(spec *Spec, out *Log, stop <-chan struct{}, deadline time.Time, last bool) (res Result, started bool) {
	reg := rtrace.StartRegion(context.Background(), "runner: start")
	// Every start is held until its process is recorded (OnStart), so
	// nothing of the program runs before queued knows its process.
	r, err, prepared := spec.Prepared.take()
	if !prepared {
		r, err = start(spec, out, false)
	}
	reg.End()
	if err != nil {
		return Result{ExitCode: -1, Err: err}, false
	}
	reg = rtrace.StartRegion(context.Background(), "runner: the program, to its leader's exit")
	pgid := r.proc.PID
	if spec.OnStart != nil {
		spec.OnStart(r.proc)
	}
	r.handOff.release()
	exited := make(chan error, 1)
	wait := waitExited
	if spec.exitWait != nil {
		wait = spec.exitWait
	}
	go func() { exited <- wait(pgid) }()
	abandonAfter := spec.AbandonAfter
	if abandonAfter <= 0 {
		abandonAfter = DefaultAbandonAfter
	}
	var abandonBound <-chan time.Time // runs from the first SIGKILL
	abandonTimer := time.NewTimer(time.Hour)
	abandonTimer.Stop()
	defer abandonTimer.Stop()
	killed := false // by a timeout, a stop or the start bound
	kill := func() {
		killed = true
		r.killAll()
		if abandonBound == nil {
			abandonTimer.Reset(abandonAfter)
			abandonBound = abandonTimer.C
		}
	}
	lad := &ladder{spec: spec, pgid: pgid, kill: kill}
	defer lad.stop()
	idle := &idleWatch{limit: spec.IdleTimeout, last: r.lastOutput}
	defer idle.stop()

	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeout = t.C
	}
	startLimit := spec.StartTimeout
	if startLimit <= 0 {
		startLimit = DefaultStartTimeout
	}
	st := time.NewTimer(startLimit)
	defer st.Stop()
	startBound, execd := st.C, r.start.done
	running := false
	var startErr error
	// Spare helpers serve only where no cgroup of its own holds a job.
	sparesServe := r.cg == nil && jobcgroup.Default() == nil
	onExec := func(err error) {
		rtrace.Log(context.Background(), "runner", "the helper executed the program (or failed)")
		execd, startBound = nil, nil
		if err != nil {
			if !(killed && killedByUs(err)) {
				startErr = r.start.describe(spec, err)
			}
			return
		}
		running = true
		if sparesServe && !spareWaits(spec.Helper) {
			// No spare waits, nor is one starting: the first jobs of a
			// host's cards, started while none has ended yet. One is
			// started now for the next card's job; otherwise they are
			// started when a job ends (below).
			goRefillSpares(spec)
		}
		lad.resend()
		if lad.rung == 0 {
			idle.arm(time.Now())
		}
	}
	var waitErr error
	for done := false; !done; {
		select {
		case waitErr = <-exited:
			done = true
		case err := <-execd:
			onExec(err)
		case <-startBound:
			startBound = nil
			startErr = r.start.hung(spec, startLimit)
			lad.killed()
		case <-timeout:
			res.TimedOut, timeout = true, nil
			idle.C = nil
			if !running {
				// Only queued's helper runs: nothing of the job's to
				// let close the device.
				lad.killed()
				break
			}
			lad.begin(running)
		case <-idle.C:
			if idle.silent(time.Now()) && lad.rung == 0 {
				res.Hung = true
				lad.begin(running)
			}
		case <-stop:
			res.Stopped, stop = true, nil
			idle.C = nil
			// SIGINT now, or, while only queued's helper runs (which the
			// signal would simply kill), as soon as it has become the
			// program; the next rungs after their graces either way, so
			// a start stuck in its working directory ends then too.
			lad.begin(running)
		case <-lad.C:
			lad.next(running)
		case <-abandonBound:
			// SIGKILL did not end it: stop waiting, so the card moves on.
			res.Abandoned, done = &Abandoned{}, true
		}
	}
	res.KillSignal, res.killText = lad.rung, lad.text()
	if sparesServe {
		// The next job's helper starts now that this program has ended,
		// off this loop, and not as it started: a process started beside
		// a program's start slows it (issue 41: a third of bash's start
		// on our machines), and a job on an idle card would wait for it.
		goRefillSpares(spec)
	}
	if res.Abandoned != nil {
		reg.End()
		return r.giveUp(spec, res, running, startErr, abandonAfter, exited)
	}
	if execd != nil {
		// It ended before its progress was read; the status pipe is
		// closed by now.
		onExec(<-execd)
	}
	// Nothing of an iteration outlives its leader: kill what is left of
	// the group, so no stray process holds the card or the output pipe.
	// The leader is a zombie until finish reaps it, so the id is still
	// ours; the job's cgroup, where there is one, takes what left the
	// group, and elsewhere its session and its marker find it.
	reg.End()
	if spec.SettleLater && running && waitErr == nil {
		if code, ok := r.endedWith(); ok && (last || code != 0 || res.Stopped || res.TimedOut || res.Hung) {
			// The run ends here: its result is known without reaping.
			res.ExitCode, res.Settled = finalCode(res, code), r.settleLater()
			return res, true
		}
	}
	reg = rtrace.StartRegion(context.Background(), "runner: sweep and reap")
	if waitErr == nil {
		r.killLeftovers()
	} else {
		r.cg.Kill()
	}
	state := r.finish()
	reg.End()

	if !running {
		res.Err = startErr
		switch {
		case res.TimedOut:
			res.ExitCode = -int(syscall.SIGKILL)
		default:
			res.ExitCode = -1
		}
		switch {
		case res.Err == nil && res.Stopped && r.start.inUserStage():
			// Stopped while its start was stuck where the user's choices
			// lead (the working directory, the shell): say so, so the job
			// is not simply queued again to get stuck once more.
			res.Err = r.start.stuckAtStop(spec)
		case res.Err == nil && !res.Stopped && !res.TimedOut:
			res.Err = fmt.Errorf("queued's exec helper ended (%s) before it started the program", state)
		}
		return res, false
	}
	res.ExitCode = finalCode(res, exitCode(state))
	return res, true
}

// finalCode is the run's exit code for an iteration that exited with
// code: -9 after the timeout, and never success once stopped.
func finalCode(res Result, code int) int {
	switch {
	case res.TimedOut:
		return -int(syscall.SIGKILL)
	case res.Stopped && code == 0:
		// It exited by itself as the stop came: a stopped run never reads
		// as success.
		return -1
	}
	return code
}

func exitCode(s *os.ProcessState) int {
	if ws, ok := s.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -int(ws.Signal())
	}
	return s.ExitCode()
}
