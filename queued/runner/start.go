package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ttkit/ttkit/queued/cpupin"
	"github.com/ttkit/ttkit/queued/execjob"
	"github.com/ttkit/ttkit/queued/jobcgroup"
)

// Starting a job: the queued-exec helper is checked, given its request
// and started in a session of its own.

// CheckHelper resolves path (following links) and checks it can serve as
// queued's exec helper: a regular executable file that, for a root
// queued, belongs to root and no one else may write (it runs as root
// until it drops to the job's user).
func CheckHelper(path string) (string, error) {
	p, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("exec helper %s: %w", path, err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("exec helper %s: %w", path, err)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("exec helper %s is not an executable file", p)
	case os.Geteuid() == 0 && (st == nil || st.Uid != 0 || fi.Mode().Perm()&0o022 != 0):
		return "", fmt.Errorf("exec helper %s must belong to root and be writable by root alone (it runs as root)", p)
	}
	return p, nil
}

// startUmask is queued's umask when it started (the unit's). Every
// program gets it explicitly, whatever queued does to its own since.
var startUmask = func() int {
	m := unix.Umask(0o022)
	unix.Umask(m)
	return m
}()

// start starts one iteration's helper in a session of its own, draining
// its output into out. It returns once the helper runs; the program's
// start is watched through r.start. The request goes without its Go
// byte: the helper takes its steps and waits for r.handOff's release,
// which comes once the process is recorded (runOnce) or the start is
// durable (Prepare). With spareOnly, only a waiting spare is used:
// without one it returns nil and no error.
func start(spec *Spec, out *Log, spareOnly bool) (*running, error) {
	if len(spec.Shell) == 0 {
		return nil, errors.New("no shell configured")
	}
	req := execjob.Request{
		Path: spec.Shell[0], Argv: append(append([]string(nil), spec.Shell...), spec.Cmd), Env: spec.Env, Dir: spec.Dir,
		Umask: startUmask, OOMScoreAdj: spec.OOMScoreAdj, Keyring: spec.Keyring || spec.Account != nil,
		AuditSession: true,
	}
	if cpus, ok := cpupin.JobCPUs(); ok {
		req.CPUs = &cpus // queued is kept to one CPU: its jobs are not
	}
	if req.Dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("reading queued's working directory: %w", err)
		}
		req.Dir = wd
	}
	uid := uint32(os.Geteuid())
	if a := spec.Account; a != nil {
		req.Cred = &execjob.Cred{UID: a.UID, GID: a.GID, Groups: a.Groups}
		uid = a.UID
	}
	if jobcgroup.Default() == nil {
		// A helper already started and waiting (see spare.go), where no
		// cgroup of its own awaits the job.
		if sp := takeSpare(spec.Helper); sp != nil {
			return sp.use(&req, out, markerOf(spec.Env), uid), nil
		}
	}
	if spareOnly {
		return nil, nil
	}
	p, err := newHelperPipes()
	if err != nil {
		return nil, err
	}
	marker := markerOf(spec.Env)
	cmd := helperOf(spec).command(p.rr, p.sw)
	cmd.Args[0] = execjob.Name
	cmd.Env = []string{} // nothing of queued's: the request carries the program's
	if marker != "" {
		// Only the marker, so a restart finds a helper still stuck in its
		// start by it, as it finds the job's processes.
		cmd.Env = []string{JobEnvVar + "=" + marker}
	}
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = p.pw, p.pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// Where queued's cgroup is delegated, the iteration starts in a cgroup
	// of its own, so a kill reaches its whole process tree (setsid or not)
	// and the OOM killer's victim is the job, not the queue; elsewhere cg
	// is nil and the process group, the session and the job's marker find
	// what is left.
	cg, _ := jobcgroup.Default().New(jobcgroup.NameFromEnv(spec.Env, JobEnvVar))
	if spec.TasksMax > 0 {
		if err := cg.LimitTasks(spec.TasksMax); err != nil && !errors.Is(err, jobcgroup.ErrNoController) {
			cg.Close()
			p.closeTheirs()
			p.closeOurs()
			return nil, fmt.Errorf("limiting the job to %d tasks: %w", spec.TasksMax, err)
		}
	}
	cg.Place(cmd.SysProcAttr)
	var clock pidClock
	if cg == nil {
		// Only a sweep needs it (see pidwindow.go): read before the start,
		// so every PID of the job comes after.
		clock = readPIDClock("/proc")
	}
	err = cmd.Start()
	p.closeTheirs()
	if err != nil {
		cg.Close()
		p.closeOurs()
		return nil, fmt.Errorf("starting queued's exec helper: %w", err)
	}
	pid := cmd.Process.Pid
	offQueuedsCPU(pid)
	// Read the start time before anything can reap the child: until then
	// the PID is still its own. The program keeps it across the execve.
	st, _ := StartTime("/proc", pid)
	r := &running{cmd: cmd, pr: p.pr, proc: Proc{PID: pid, Start: st}, copied: make(chan struct{}), cg: cg,
		marker: marker, uid: uid, start: watchStart(p.sr), clock: clock, handOff: sendRequest(p.rw, &req)}
	go r.drain(out)
	return r, nil
}

// helperPipes are an exec helper's three pipes: its request (the helper
// reads rr, queued writes rw), its status (the helper writes sw, queued
// reads sr) and its output (pw and pr).
type helperPipes struct {
	rr, rw, sr, sw, pr, pw *os.File
}

// newHelperPipes makes a helper's pipes, all or none. Queued's ends are
// non-blocking and held by Go's poller (read with deadlines, no thread
// blocked on them); the helper's are left blocking and never handed to
// the poller. os.Pipe would make both ends non-blocking and register
// them, and handing them to the helper would make its ends blocking
// again and unregister them: fifteen system calls a start that served
// nothing (issue 41).
func newHelperPipes() (p helperPipes, err error) {
	defer func() {
		if err != nil { // closing the pipes not made is a no-op
			p.closeTheirs()
			p.closeOurs()
		}
	}()
	if p.rr, p.rw, err = helperPipe(false); err != nil {
		return p, err
	}
	if p.sr, p.sw, err = helperPipe(true); err != nil {
		return p, err
	}
	p.pr, p.pw, err = helperPipe(true)
	return p, err
}

// helperPipe makes one pipe whose read end is queued's when weRead, else
// its write end.
func helperPipe(weRead bool) (r, w *os.File, err error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, fmt.Errorf("creating the exec helper's pipes: %w", err)
	}
	ours := fds[1]
	if weRead {
		ours = fds[0]
	}
	// A new pipe's end has no status flag but its access mode, which
	// F_SETFL leaves alone: one call sets O_NONBLOCK.
	if _, err := unix.FcntlInt(uintptr(ours), unix.F_SETFL, unix.O_NONBLOCK); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("creating the exec helper's pipes: %w", err)
	}
	// os.NewFile hands a non-blocking descriptor to the poller, and
	// leaves a blocking one out of it.
	return os.NewFile(uintptr(fds[0]), "|0"), os.NewFile(uintptr(fds[1]), "|1"), nil
}

// closeTheirs closes the helper's ends: once it holds them, or when it
// will not start.
func (p helperPipes) closeTheirs() {
	p.rr.Close()
	p.sw.Close()
	p.pw.Close()
}

// closeOurs closes queued's ends, when the helper did not start.
func (p helperPipes) closeOurs() {
	p.rw.Close()
	p.sr.Close()
	p.pr.Close()
}

// helperOf is the exec helper spec names, or queued's default one.
func helperOf(spec *Spec) helperExec {
	if spec.Helper != "" {
		return helperExec{argv: []string{spec.Helper}}
	}
	return defaultHelper()
}

// drain copies the iteration's output into out until the pipe closes,
// noting when it last wrote, and then closes r.copied.
func (r *running) drain(out *Log) {
	defer close(r.copied)
	buf := make([]byte, 32<<10)
	for {
		n, err := r.pr.Read(buf)
		if n > 0 {
			r.lastOut.Store(time.Now().UnixNano())
			out.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// markerOf is the value of the job marker in env (the last one, as the
// kernel's environ lists them in order and the scheduler appends its own
// last), or "".
func markerOf(env []string) string {
	m := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, JobEnvVar+"="); ok {
			m = v
		}
	}
	return m
}
