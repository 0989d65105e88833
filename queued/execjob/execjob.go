// Package execjob is queued's exec helper: the small program every job,
// reset command and health check is started through. queued starts it in
// a session of its own with the request on descriptor 3 and a status pipe
// on descriptor 4; the helper prepares the process (descriptors, OOM
// score, umask, the user's credentials, a keyring of its own), enters the
// working directory and executes the shell, becoming the program. queued
// holds the process from the first moment, so its timeout, kills and
// resets reach every step, even a working directory that never answers.
//
// It is its own binary, queued-exec (cmd/queued-exec), so that starting
// it costs a few milliseconds, not the tens queued's own start would; a
// queued without it next to its executable runs itself as the helper
// (`queued exec-job`). Its imports stay few for the same reason. Built
// with cgo, queued-exec takes the same steps in C before the Go runtime
// starts (cmd/queued-exec/start.c), a few milliseconds less again; the
// steps here are the reference, and the tests run both helpers side by
// side (helpers_test.go), so a change to a step is made in both.
package execjob

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The exec helper. Every program queued runs (a job's iteration, a reset,
// a health check) is started as a copy of queued itself, re-executed as
// `queued exec-job` from /proc/self/exe, which becomes the program with
// one execve. The daemon's own start of that helper returns as soon as the
// helper's binary is running, before anything the program's user chose
// can block it: the helper, not the daemon, drops to the user, enters the
// working directory (which may sit on a mount that never answers) and
// runs the shell. So the daemon holds the process (its pid and pidfd) from
// the first moment and its timeout, stop and kill reach every step.
//
// The helper starts in a session of its own with no controlling terminal
// (setsid), so nothing it becomes can reach the terminal queued was
// started from or join one of queued's process groups. It gets no
// environment of queued's (its request carries the program's), so a
// user's LD_PRELOAD or GODEBUG never shapes a process that still has
// queued's privileges.
//
// Protocol (wire.go): descriptor 3 holds the request and then its Go
// byte; on descriptor 4, a pipe, the helper writes one status line per
// step it is about to take ("chdir"), and, when a step fails, one with
// the error ("chdir\terrno\t13") before it exits with FailCode. A
// successful execve closes descriptor 4 (close-on-exec) with no failure
// written. Where queued holds queued-exec open, the helper was executed
// through descriptor 5, queued-exec itself; like every descriptor above 4
// it is closed at the program's execve.

// Arg is the argument that makes queued (or a test binary) the exec
// helper when it has no queued-exec beside it.
const Arg = "exec-job"

// Name is the helper's process name (comm) until it becomes the program,
// whatever path or descriptor it was executed by.
const Name = "queued-exec"

// FailCode is the helper's exit status when it could not run the program;
// queued reads the reason from the status pipe, not from it.
const FailCode = 127

// maxRequest bounds the request the helper reads: a command and an
// environment within the API's limits take well under 2 MiB.
const maxRequest = 16 << 20

// Stages, reported on the status pipe before each is taken.
const (
	StageSetup = "setup" // credentials, keyring, umask, OOM score
	StageChdir = "chdir" // entering the working directory, as the user
	StageReady = "ready" // every step taken; waiting for the Go byte
	StageExec  = "exec"  // execve of the shell
)

// Request is what the helper does, in order: OOM score, umask,
// groups, gid, uid, keyring, working directory, then, once its Go byte
// comes, execve.
type Request struct {
	Path string
	Argv []string
	Env  []string
	Dir  string
	// Cred, when set, is the user to become: supplementary groups, then
	// gid, then uid (real, effective and saved), checked afterwards.
	Cred *Cred
	// Keyring gives the program a new, empty session keyring of its own
	// (joined after the switch to Cred, so it is the user's).
	Keyring bool
	// Umask is set as given.
	Umask int
	// AuditSession gives the program an audit session of its own: the
	// helper writes the program's uid to its loginuid before the switch
	// to Cred, and the kernel assigns a new session id
	// (/proc/<pid>/sessionid), which every process the program starts
	// inherits and none can change without CAP_AUDIT_CONTROL: not by
	// setsid, a double fork or a changed environment. It is how queued
	// finds what the program left behind where no cgroup holds it. Best
	// effort: where the kernel refuses (no audit support, a loginuid
	// already set without the capability, or made immutable), the program
	// keeps queued's session, and queued sees that.
	AuditSession bool
	// OOMScoreAdj, when set, is written to /proc/self/oom_score_adj
	// before the switch, so the kernel's OOM killer takes the program
	// before queued and the user cannot lower it again.
	OOMScoreAdj *int
	// CPUs, when set, are the CPUs the program may run on, set first: a
	// queued kept to one CPU (package cpupin) hands on the ones it
	// started with, which its helper, forked from it, did not inherit.
	CPUs *unix.CPUSet
}

// Cred is a user's identity as the helper sets it.
type Cred struct {
	UID    uint32
	GID    uint32
	Groups []uint32
}

// Status is one line on the status pipe.
type Status struct {
	Stage string
	// Errno is set when the stage failed with a system error.
	Errno syscall.Errno
	// Msg is set when it failed otherwise.
	Msg string
}

// Main runs the helper and returns the exit status for a failure: on
// success it does not return, the process having become the program.
func Main() int { return execJob() }

// execJob runs the helper's steps and returns only on failure.
func execJob() int {
	// Credentials, the keyring and the working directory are set on this
	// thread and the execve is made from it: the program is this thread.
	runtime.LockOSThread()
	if _, err := unix.FcntlInt(4, unix.F_GETFD, 0); err != nil {
		fmt.Fprintln(os.Stderr, "queued exec helper: no status descriptor; this is queued's own helper, not a command")
		return 2
	}
	if typ, err := unix.GetsockoptInt(3, unix.SOL_SOCKET, unix.SO_TYPE); err == nil && typ == unix.SOCK_SEQPACKET {
		// queued asks for a spawner (runner's spawner.go), which only the
		// C build is: ending at once tells it so.
		fmt.Fprintln(os.Stderr, "queued exec helper: descriptor 3 is a socket: only the C build of queued-exec makes spares")
		return 2
	}
	// Executed through a descriptor, the helper would show in ps and top
	// by the descriptor's number ("5") until its execve, which may be long
	// for a working directory that never answers. Writing the comm of
	// /proc/self names the process (its leader thread), whichever thread
	// this is.
	os.WriteFile("/proc/self/comm", []byte(Name), 0)
	status := os.NewFile(4, "status")
	report := func(st Status) { status.Write(st.Line()) }
	fail := func(stage string, err error) int {
		st := Status{Stage: stage}
		if !errors.As(err, &st.Errno) {
			st.Msg = err.Error()
		}
		report(st)
		return FailCode
	}
	report(Status{Stage: StageSetup})
	reqFile := os.NewFile(3, "request")
	if reqFile == nil {
		return fail(StageSetup, errors.New("no request descriptor"))
	}
	defer reqFile.Close()
	req, err := ReadRequest(reqFile)
	if err != nil {
		return fail(StageSetup, err)
	}
	// Nothing queued inherited reaches the program: every descriptor above
	// the status pipe, and the pipe itself, closes at the execve.
	if err := unix.CloseRange(4, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fail(StageSetup, fmt.Errorf("marking descriptors close-on-exec: %w", err))
	}
	if req.CPUs != nil {
		// This thread is the program (above): its CPUs are the program's.
		if err := unix.SchedSetaffinity(0, req.CPUs); err != nil {
			return fail(StageSetup, fmt.Errorf("taking the CPUs queued started with: %w", err))
		}
	}
	if req.OOMScoreAdj != nil {
		// Raising it is always allowed; lowering it needs privileges a
		// user-mode queued lacks, and then the program keeps queued's.
		os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(*req.OOMScoreAdj)), 0)
	}
	unix.Umask(req.Umask)
	if req.AuditSession {
		newAuditSession(req.Cred)
	}
	if c := req.Cred; c != nil {
		if err := become(c); err != nil {
			return fail(StageSetup, err)
		}
	}
	if req.Keyring {
		if _, err := unix.KeyctlInt(unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0, 0, 0); err != nil {
			return fail(StageSetup, fmt.Errorf("joining a session keyring of its own: %w", err))
		}
	}
	report(Status{Stage: StageChdir})
	if err := syscall.Chdir(req.Dir); err != nil {
		return fail(StageChdir, err)
	}
	report(Status{Stage: StageReady})
	var goByte [1]byte
	if n, _ := reqFile.Read(goByte[:]); n != 1 || goByte[0] != Go {
		return fail(StageReady, ErrCancelled)
	}
	reqFile.Close()
	defaultSignals()
	report(Status{Stage: StageExec})
	err = syscall.Exec(req.Path, req.Argv, req.Env)
	return fail(StageExec, err)
}

// defaultSignals gives every signal queued inherited ignored its default
// disposition, which the program then starts with: an ignored SIGINT
// would leave the kill ladder's first rung, which tt-metal handles by
// closing the device, doing nothing. The Go runtime keeps SIGHUP and
// SIGINT ignored when it starts with them ignored (`nohup`, or `&` in a
// script) and never touches 32, which glibc keeps for itself; execve
// resets only the signals that have a handler. It runs just before the
// execve; a signal that comes in between ends the helper as it would
// the program.
func defaultSignals() {
	var act, dfl [4]uint64 // struct sigaction: handler, flags, restorer, mask
	for sig := uintptr(1); sig <= 64; sig++ {
		_, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, sig, 0, uintptr(unsafe.Pointer(&act)), 8, 0, 0)
		if e == 0 && act[0] == 1 { // SIG_IGN
			unix.RawSyscall6(unix.SYS_RT_SIGACTION, sig, uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
		}
	}
}

// become switches every thread of the helper to the user: groups, then
// gid, then uid (package syscall applies each to all threads), and checks
// that the process has the ids it asked for and cannot have root back.
func become(c *Cred) error {
	groups := make([]int, len(c.Groups))
	for i, g := range c.Groups {
		groups[i] = int(g)
	}
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("setting the groups of uid %d: %w", c.UID, err)
	}
	if err := syscall.Setresgid(int(c.GID), int(c.GID), int(c.GID)); err != nil {
		return fmt.Errorf("setting gid %d: %w", c.GID, err)
	}
	if err := syscall.Setresuid(int(c.UID), int(c.UID), int(c.UID)); err != nil {
		return fmt.Errorf("setting uid %d: %w", c.UID, err)
	}
	// An id of all ones is -1 to the kernel, which reads it as "leave
	// this id as it is": the ids the process has now must be the
	// request's, every one, or a job would keep root's gid or uid.
	// The kernel's ids are unsigned 32 bits; Getres* gives them as a C
	// int, so an id past 2^31 reads negative: compare as the kernel does.
	if r, e, s := unix.Getresgid(); uint32(r) != c.GID || uint32(e) != c.GID || uint32(s) != c.GID {
		return fmt.Errorf("gid %d was not taken: the process has %d, %d, %d", c.GID, uint32(r), uint32(e), uint32(s))
	}
	if r, e, s := unix.Getresuid(); uint32(r) != c.UID || uint32(e) != c.UID || uint32(s) != c.UID {
		return fmt.Errorf("uid %d was not taken: the process has %d, %d, %d", c.UID, uint32(r), uint32(e), uint32(s))
	}
	if c.UID != 0 {
		if err := syscall.Setuid(0); err == nil {
			return fmt.Errorf("uid %d could switch back to root", c.UID)
		}
	}
	return nil
}

// newAuditSession gives this thread, the one that executes the program, a
// new audit session by writing the program's uid to its loginuid (the
// thread's own file: the kernel takes the write only from the task it
// names, and the program is this thread after the execve). Failure leaves
// the session queued's, which queued tells by comparing the two.
func newAuditSession(c *Cred) {
	uid := uint32(os.Geteuid())
	if c != nil {
		uid = c.UID
	}
	os.WriteFile("/proc/thread-self/loginuid", []byte(strconv.FormatUint(uint64(uid), 10)), 0)
}
