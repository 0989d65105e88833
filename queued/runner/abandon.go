package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ttkit/ttkit/internal/procthread"
)

// Abandoning a process SIGKILL does not end: one asleep in the kernel
// uninterruptibly (state D), such as on a FUSE or network mount whose
// server read the request and never answers, dies only when that wait
// ends, which may be never. The run does not wait for it: once
// AbandonAfter has passed since the kill it ends, the card moves on, and
// the process is kept under watch (Abandoned) until it dies and is reaped.

// DefaultAbandonAfter is how long a run waits, after its SIGKILL, for
// its leader to die before it abandons it (Spec.AbandonAfter).
const DefaultAbandonAfter = 5 * time.Second

// Abandoned is a process a run stopped waiting for: it did not die within
// AbandonAfter of its SIGKILL. It stays unreaped (its PID, process group
// and session ids cannot be reused) until it dies; it may still hold the
// card, so whoever reports a card's holders must count it as a holder
// outside the queue (the card's next job is another job).
type Abandoned struct {
	// PID is the process, the iteration's leader (its process group and
	// session id too); Start its start time (clock ticks since boot).
	PID   int
	Start uint64
	// JobID is its TT_QUEUE_JOB_ID, "" for none.
	JobID string
	// Since is when the run abandoned it.
	Since time.Time
	// Reason says why: what it was doing when the run gave up on it.
	Reason string
}

// abandonedProcs holds the abandoned processes not yet reaped, by PID.
var abandonedProcs = struct {
	sync.Mutex
	m map[int]Abandoned
}{m: map[int]Abandoned{}}

// AbandonedProcs lists the processes runs abandoned that have not died
// yet, oldest first: the scheduler reports them, and a card's holder with
// one of these PIDs is a process the queue gave up on, not its job.
func AbandonedProcs() []Abandoned {
	abandonedProcs.Lock()
	defer abandonedProcs.Unlock()
	out := make([]Abandoned, 0, len(abandonedProcs.m))
	for _, a := range abandonedProcs.m {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b Abandoned) int { return a.Since.Compare(b.Since) })
	return out
}

// stuckReason says what pid is doing that SIGKILL did not end: its state
// and the kernel function it sleeps in. SIGKILL ends a process's threads
// one by one, so the leader can be a zombie while another thread (a Go
// helper's, entering a working directory that never answers) still
// sleeps in D and holds the process: then that thread is the one named.
func stuckReason(procRoot string, pid int, after time.Duration) string {
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	what := "still alive"
	if st, err := readStat(procRoot, pid); err == nil {
		what = "in state " + string(st.state)
		if st.state != 'D' {
			if tid, ok := sleepingThread(dir); ok {
				what = fmt.Sprintf("in state D (uninterruptible sleep, its thread %d)", tid)
				dir = filepath.Join(dir, "task", strconv.Itoa(tid))
			}
		} else {
			what += " (uninterruptible sleep)"
		}
	}
	if w, err := os.ReadFile(filepath.Join(dir, "wchan")); err == nil {
		if s := strings.TrimSpace(string(w)); s != "" && s != "0" {
			what += ", waiting in " + s
			if strings.HasPrefix(s, "fuse") || strings.Contains(s, "request_wait_answer") {
				what += " (a FUSE server that does not answer)"
			}
		}
	}
	return fmt.Sprintf("process %d did not die within %s of SIGKILL (%s); queued stopped waiting for it and watches it until it dies",
		pid, after, what)
}

// sleepingThread is a thread of the process at dir (/proc/<pid>), other
// than its leader, in uninterruptible sleep.
func sleepingThread(dir string) (int, bool) {
	td := procthread.Other(dir, func(td string) bool {
		st, err := readStatFile(filepath.Join(td, "stat"), make([]byte, statMax))
		return err == nil && st.state == 'D'
	})
	tid, err := strconv.Atoi(filepath.Base(td))
	return tid, td != "" && err == nil
}

// abandon gives up on r's leader, which SIGKILL did not end: it is
// registered under watch, the output is no longer read into the run's
// Log (which its owner closes once the run ends), and a goroutine reaps
// the leader, and cleans up after it, whenever it dies (exited delivers
// then).
func (r *running) abandon(after time.Duration, exited <-chan error) *Abandoned {
	a := Abandoned{PID: r.proc.PID, Start: r.proc.Start, JobID: r.marker, Since: time.Now(),
		Reason: stuckReason("/proc", r.proc.PID, after)}
	abandonedProcs.Lock()
	abandonedProcs.m[a.PID] = a
	abandonedProcs.Unlock()
	r.pr.SetReadDeadline(time.Now())
	<-r.copied
	go func() {
		if err := <-exited; err == nil {
			syscall.Kill(-a.PID, syscall.SIGKILL)
		}
		r.cg.Kill()
		r.cmd.Wait()
		r.pr.Close()
		r.cg.Close()
		abandonedProcs.Lock()
		delete(abandonedProcs.m, a.PID)
		abandonedProcs.Unlock()
	}()
	return &a
}

// giveUp ends an iteration whose leader SIGKILL did not end: what else is
// left of it is killed (its group and session, or its cgroup; the
// leader's ids are still its own, unreaped), the leader is abandoned, and
// the result reads as killed (-9), with the start's error if its program
// never started.
func (r *running) giveUp(spec *Spec, res Result, running bool, startErr error, after time.Duration, exited <-chan error) (Result, bool) {
	r.killLeftovers()
	res.Abandoned = r.abandon(after, exited)
	res.ExitCode = -int(syscall.SIGKILL)
	if !running {
		res.Err = startErr
		if res.Err == nil && res.Stopped && r.start.inUserStage() {
			res.Err = r.start.stuckAtStop(spec)
		}
	}
	return res, running
}
