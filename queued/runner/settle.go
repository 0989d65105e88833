package runner

import (
	"context"
	rtrace "runtime/trace"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Settling a run's last iteration later (Spec.SettleLater): the result
// is known from the leader's exit status, read without reaping it, and
// the sweep of what it left and the reap go on while the caller commits
// the job's end (issue 41).

// endedWith is the exit code of the iteration's leader, which has exited
// and is not reaped yet, from waitid with WNOWAIT (the leader stays a
// zombie, so its PID, process group and session stay its own).
func (r *running) endedWith() (int, bool) {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, r.proc.PID, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if err != nil || info.Signo != int32(syscall.SIGCHLD) {
		return 0, false
	}
	switch status := childStatus(&info); info.Code {
	case cldExited:
		return int(status), true
	case cldKilled, cldDumped:
		return -int(status), true
	}
	return 0, false
}

// si_code values of SIGCHLD (the kernel's CLD_EXITED and on).
const (
	cldExited = 1
	cldKilled = 2
	cldDumped = 3
)

// childStatus is si_status of a SIGCHLD siginfo, which x/sys/unix leaves
// in the struct's padding: after si_signo, si_errno, si_code, the union
// begins at 16 bytes on 64-bit Linux (it holds pointers) and 12 on
// 32-bit, and si_pid and si_uid precede si_status in it.
func childStatus(info *unix.Siginfo) int32 {
	off := uintptr(12)
	if unsafe.Sizeof(uintptr(0)) == 8 {
		off = 16
	}
	return *(*int32)(unsafe.Add(unsafe.Pointer(info), off+8))
}

// settleLater kills what is left of the iteration and, in the
// background, sweeps it and reaps the leader; it returns once the output
// is drained, with a channel that closes when the rest is done.
func (r *running) settleLater() <-chan struct{} {
	syscall.Kill(-r.proc.PID, syscall.SIGKILL)
	settled := make(chan struct{})
	go func() {
		defer close(settled)
		defer rtrace.StartRegion(context.Background(), "runner: sweep and reap, after the result").End()
		r.killLeftovers()
		r.cmd.Wait()
		r.cg.Close()
	}()
	r.pr.SetReadDeadline(time.Now().Add(drainTimeout))
	<-r.copied
	r.pr.Close()
	return settled
}
