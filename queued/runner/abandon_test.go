package runner

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/fusetest"
)

// A working directory on a FUSE server that reads requests and never
// answers puts the job's process in uninterruptible sleep: SIGKILL does
// not end it. The run still ends within the kill grace and a few seconds,
// so the card moves on.
func TestRun_UnkillableProcessIsAbandoned(t *testing.T) {
	for _, tc := range []struct {
		name string
		prep func(spec *Spec, dir string, stop chan struct{})
	}{
		{"timeout in its start", func(spec *Spec, dir string, stop chan struct{}) {
			spec.Dir, spec.Timeout = dir, 500*time.Millisecond
		}},
		{"stop in its start", func(spec *Spec, dir string, stop chan struct{}) {
			spec.Dir, spec.KillGrace = dir, 200*time.Millisecond
			time.AfterFunc(300*time.Millisecond, func() { close(stop) })
		}},
		{"timeout of the program", func(spec *Spec, dir string, stop chan struct{}) {
			spec.Cmd, spec.Timeout = "echo started; exec stat "+dir, time.Second
			spec.KillGrace, spec.TermGrace = 100*time.Millisecond, 100*time.Millisecond
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t, 1<<20)
			dir, abort := fusetest.UnansweredDir(t)
			spec := b.spec("echo never")
			spec.AbandonAfter = 2 * time.Second
			stop := make(chan struct{})
			tc.prep(&spec, dir, stop)
			began := time.Now()
			res := within(t, runAsync(spec, b, stop), 15*time.Second, abort, "a job whose process cannot be killed")
			took := time.Since(began)
			a := res.Abandoned
			t.Logf("%+v after %s: %+v", res, took, a)
			if a == nil || res.ExitCode != -9 {
				t.Fatalf("%+v after %s; want the leader abandoned", res, took)
			}
			// The kill comes within a second (timeout or grace); then
			// AbandonAfter, and a few seconds of slack for a loaded machine.
			if limit := time.Second + spec.AbandonAfter + 4*time.Second; took > limit {
				t.Errorf("the run ended after %s, over %s", took, limit)
			}
			if !strings.Contains(a.Reason, "state D") || !strings.Contains(a.Reason, "did not die") {
				t.Errorf("reason %q does not say it sleeps in D", a.Reason)
			}
			if !watched(a.PID) {
				t.Errorf("pid %d is not under watch: %+v", a.PID, AbandonedProcs())
			}
			abort() // the server dies: the process wakes, dies and is reaped
			waitFor(t, "the abandoned process to be reaped", func() bool { return !watched(a.PID) && dead(a.PID) })
		})
	}
}

// watched reports whether pid is among the abandoned processes.
func watched(pid int) bool {
	for _, a := range AbandonedProcs() {
		if a.PID == pid {
			return true
		}
	}
	return false
}

// The same bound without FUSE: a leader whose death the run never sees
// (the seam stands in for the kernel's uninterruptible sleep) is abandoned
// AbandonAfter after its SIGKILL, and reaped once its death is seen.
func TestRun_LeaderNeverSeenDeadIsAbandoned(t *testing.T) {
	t.Parallel()
	b := setup(t, 1<<20)
	spec := b.spec("sleep 1000")
	spec.Timeout, spec.AbandonAfter = 200*time.Millisecond, 300*time.Millisecond
	spec.KillGrace, spec.TermGrace = 100*time.Millisecond, 100*time.Millisecond
	release := make(chan struct{})
	spec.exitWait = func(pid int) error {
		<-release
		return waitExited(pid)
	}
	began := time.Now()
	res := within(t, runAsync(spec, b, nil), 10*time.Second, func() { close(release) }, "a leader never seen dead")
	if res.Abandoned == nil || !res.TimedOut || res.ExitCode != -9 {
		t.Fatalf("%+v; want a timeout that abandoned its leader", res)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("the run ended after %s", took)
	}
	if !watched(res.Abandoned.PID) {
		t.Errorf("pid %d is not under watch", res.Abandoned.PID)
	}
	close(release)
	waitFor(t, "the abandoned leader to be reaped", func() bool { return !watched(res.Abandoned.PID) })
}

// SIGKILL ends a process's threads one by one: the helper's leader
// thread can be a zombie already while another of its threads, the one
// entering the unanswered working directory, still sleeps in D and holds
// the process. The reason names that thread's state and where it waits,
// not the leader's "Z" (seen in CI, where the Go runtime had the chdir
// on a thread other than the leader).
func TestRun_StuckReasonNamesTheThreadThatHoldsTheProcess(t *testing.T) {
	t.Parallel()
	p := &fakeProc{root: t.TempDir(), t: t}
	stat := func(pid int, state string) string {
		return fmt.Sprintf("%d (queued-exec) %s 1 %d %d 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 5 0 4308886 0 0\n", pid, state, pid, pid)
	}
	p.write("4242/stat", stat(4242, "Z"))
	p.write("4242/wchan", "0")
	p.write("4242/task/4242/stat", stat(4242, "Z"))
	p.write("4242/task/4242/wchan", "0")
	p.write("4242/task/4245/stat", stat(4245, "D"))
	p.write("4242/task/4245/wchan", "request_wait_answer")
	p.write("4242/task/4246/stat", stat(4246, "S"))
	p.write("4242/task/4246/wchan", "futex_wait_queue")
	got := stuckReason(p.root, 4242, 2*time.Second)
	for _, want := range []string{"process 4242 did not die within 2s of SIGKILL", "state D", "thread 4245", "request_wait_answer", "FUSE"} {
		if !strings.Contains(got, want) {
			t.Errorf("reason %q does not say %q", got, want)
		}
	}
	// A process of one thread reads as before.
	p.write("4300/stat", stat(4300, "D"))
	p.write("4300/wchan", "request_wait_answer")
	p.write("4300/task/4300/stat", stat(4300, "D"))
	if got := stuckReason(p.root, 4300, time.Second); !strings.Contains(got, "in state D (uninterruptible sleep)") || strings.Contains(got, "thread") {
		t.Errorf("one thread: %q", got)
	}
}
