package runner

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/ttkit/ttkit/queued/execjob"
)

// Spare helpers take the exec helper's start off a job's dispatch (issue
// 41): when a job's program ends, the helper of the next one is started,
// in a session of its own, and waits, blocked reading its request from a
// pipe. It is not started as a program starts, which it would slow,
// unless no spare waits at all (the first jobs of a host's cards). A
// dispatch then writes the request and the helper goes on with its steps
// (credentials, keyring, working directory) and executes the shell, as a
// helper started for the job would; its start bound, stop and kill
// ladder are the same. Only where no cgroup holds a job: a job's cgroup
// is its own, chosen when its helper is cloned into it. A spare carries
// no job marker (its job is not known when it starts): the process
// record of its job (Spec.OnStart) is what finds it after a crash. When
// queued exits, a spare reads the end of its request and exits.

// maxSpares bounds the spares kept for one helper: one for each card
// that may dispatch at once on a host of two, beyond which a start is
// the slow one.
const maxSpares = 2

// spare is a helper started ahead of its job.
type spare struct {
	cmd   *exec.Cmd
	req   *os.File // the request pipe's write end
	sr    *os.File // the status pipe's read end
	pr    *os.File // the output pipe's read end
	proc  Proc
	clock pidClock
}

// waitingSpares is the set of the PIDs of the spares that wait (not yet
// taken for a job). Each is the leader of a session of its own, which
// nothing else can join (setsid makes a new one; setpgid stays within
// its session), so a process of such a session is a waiting spare or
// one of its threads, never a job's: a sweep reads no more of it.
var waitingSpares sync.Map // int → struct{}

// waitingSpare reports whether session is a waiting spare's.
func waitingSpare(session int) bool {
	_, ok := waitingSpares.Load(session)
	return ok
}

// spares holds the waiting spares by helper (Spec.Helper).
var spares struct {
	sync.Mutex
	byHelper map[string][]*spare
}

// takeSpare returns a waiting spare of helper that is still alive, or nil.
func takeSpare(helper string) *spare {
	for {
		spares.Lock()
		list := spares.byHelper[helper]
		if len(list) == 0 {
			spares.Unlock()
			return nil
		}
		sp := list[len(list)-1]
		spares.byHelper[helper] = list[:len(list)-1]
		spares.Unlock()
		waitingSpares.Delete(sp.proc.PID)
		if sp.alive() {
			return sp
		}
		sp.discard()
	}
}

// waiting is how many spares of helper wait.
func waiting(helper string) int {
	spares.Lock()
	defer spares.Unlock()
	return len(spares.byHelper[helper])
}

// spareWaits reports whether a spare of helper waits or is being
// started.
func spareWaits(helper string) bool { return waiting(helper) > 0 || refilling.Load() }

// refilling is set while a goRefillSpares runs: one at a time is enough
// to keep up, and a burst of short jobs starts no pile of helpers.
var refilling atomic.Bool

// goRefillSpares refills the spares of spec's helper in a goroutine of
// its own, unless one already does.
func goRefillSpares(spec *Spec) {
	if !refilling.CompareAndSwap(false, true) {
		return
	}
	helper := spec.Helper
	go func() {
		defer refilling.Store(false)
		refillSpares(&Spec{Helper: helper})
	}()
}

// refillSpares starts a spare of spec's helper unless maxSpares wait.
// A spare that cannot start is no error: the next job starts its helper
// itself.
func refillSpares(spec *Spec) {
	if waiting(spec.Helper) >= maxSpares {
		return
	}
	sp, err := startSpare(spec.Helper, helperOf(spec))
	if err != nil {
		return
	}
	spares.Lock()
	defer spares.Unlock()
	if spares.byHelper == nil {
		spares.byHelper = map[string][]*spare{}
	}
	if len(spares.byHelper[spec.Helper]) >= maxSpares {
		go sp.discard()
		return
	}
	spares.byHelper[spec.Helper] = append(spares.byHelper[spec.Helper], sp)
}

// startSpare starts helper (known as key) waiting for its request on a
// pipe: forked by the helper's spawner where it has one (spawner.go),
// else started here. A spawner that fails a request may have forked
// before it failed, so the spare started instead gets pipes of its own:
// such a fork reads the end of its request and exits.
func startSpare(key string, helper helperExec) (*spare, error) {
	if sp := spawnerFor(key, helper); sp != nil {
		s, err := sparePipes(func(rr, sw, pw *os.File) (*exec.Cmd, error) { return sp.spawn(rr, sw, pw) })
		if err == nil {
			return s, nil
		}
		dropSpawner(key, sp)
	}
	return sparePipes(func(rr, sw, pw *os.File) (*exec.Cmd, error) {
		cmd := helper.command(rr, sw)
		cmd.Args[0] = execjob.Name
		cmd.Env = []string{}
		cmd.Dir = "/"
		cmd.Stdout, cmd.Stderr = pw, pw
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return cmd, err
		}
		offQueuedsCPU(cmd.Process.Pid)
		return cmd, nil
	})
}

// sparePipes makes a spare's pipes and starts it with start, given the
// ends that are the spare's: the request's read end rr, the status
// pipe's write end sw and the output's write end pw.
func sparePipes(start func(rr, sw, pw *os.File) (*exec.Cmd, error)) (*spare, error) {
	p, err := newHelperPipes()
	if err != nil {
		return nil, err
	}
	clock := readPIDClock("/proc") // before the start: every PID of its job comes after
	cmd, err := start(p.rr, p.sw, p.pw)
	p.closeTheirs()
	if err != nil {
		p.closeOurs()
		return nil, fmt.Errorf("starting a spare exec helper: %w", err)
	}
	st, _ := StartTime("/proc", cmd.Process.Pid)
	waitingSpares.Store(cmd.Process.Pid, struct{}{})
	return &spare{cmd: cmd, req: p.rw, sr: p.sr, pr: p.pr, proc: Proc{PID: cmd.Process.Pid, Start: st}, clock: clock}, nil
}

// alive reports whether the spare has not exited (it is our child, not
// yet reaped: a look that does not reap it).
func (sp *spare) alive() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, sp.proc.PID, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err == nil && info.Signo == 0
}

// discard ends a spare that will not be used.
func (sp *spare) discard() {
	waitingSpares.Delete(sp.proc.PID)
	sp.req.Close() // it reads the end of its request and exits
	sp.sr.Close()
	sp.pr.Close()
	sp.cmd.Process.Kill()
	sp.cmd.Wait()
}

// use hands req to the spare, without its Go byte (see start): it
// becomes the iteration r.
func (sp *spare) use(req *execjob.Request, out *Log, marker string, uid uint32) *running {
	clock := sp.clock
	if last, ok := readInt("/proc/sys/kernel/ns_last_pid", make([]byte, 32)); ok && last > 0 {
		// Read before the request is written: every process of the job
		// comes after (see pidClock.after).
		clock.after = last
	}
	r := &running{cmd: sp.cmd, pr: sp.pr, proc: sp.proc, copied: make(chan struct{}),
		marker: marker, uid: uid, start: watchStart(sp.sr), clock: clock, handOff: sendRequest(sp.req, req)}
	go r.drain(out)
	return r
}
