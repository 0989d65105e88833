package scheduler

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
)

// markedOnly lets every start's mark through, so that fault applies to
// commits alone.
func (f *faultStore) markedOnly(fault func([]store.Job) error) {
	f.mu.Lock()
	f.markFault = func([]store.Job) error { return nil }
	f.fault = fault
	f.mu.Unlock()
}

// A job's program runs once its start is marked in the start log, before
// its running record is committed: the commit goes on while it runs
// (issue 41). Held here until the program has run, the commit then lands
// and the job ends as usual.
func TestQueue_AMarkedStartRunsBeforeItsRecordCommits(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	gate, release := b.gate()
	g := b.submit(0, gate)
	b.waitOutput(g.ID, "started")
	ran := filepath.Join(b.work, "ran")
	j := b.submit(0, "echo ran >> "+ran)
	held, free := make(chan struct{}), make(chan struct{})
	var holding sync.Once // the start's commit and the process record's both read running
	b.fs.markedOnly(func(jobs []store.Job) error {
		for _, r := range jobs {
			if r.ID == j.ID && r.State == store.StateRunning {
				holding.Do(func() { close(held) })
				<-free
			}
		}
		return nil
	})
	release()
	<-held
	poll(t, "the job's program to run while its start commits", func() bool {
		data, _ := os.ReadFile(ran)
		return string(data) == "ran\n"
	})
	if rec, err := b.st.Job(j.ID); err != nil || rec.State != store.StateQueued {
		t.Fatalf("stored while its start commits: %s, %v; want it still queued", rec.State, err)
	}
	marks, err := b.fs.Marks()
	if err != nil || len(marks) != 1 || marks[0] != (store.StartMark{Card: 0, ID: j.ID, Attempt: 1}) {
		t.Fatalf("start log: %+v, %v; want card 0's slot naming %s", marks, err, j.ID)
	}
	close(free)
	if info := b.waitDone(j.ID); *info.ExitCode != 0 || info.Iterations != 1 {
		t.Fatalf("%+v", info.Job)
	}
	if rec, _ := b.st.Job(j.ID); rec.State != store.StateDone {
		t.Fatalf("stored: %s", rec.State)
	}
}

// A marked start whose commit fails runs on: the job is not queued
// again nor stopped (its program may be running), dispatch stops while
// the store fails, the job's end is held, and once the store recovers
// its end is written and the next job runs.
func TestQueue_AMarkedStartWhoseCommitFailsRunsOn(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	gate, release := b.gate()
	g := b.submit(0, gate)
	b.waitOutput(g.ID, "started")
	jGate, jRelease := b.gate()
	j := b.submit(0, jGate)
	behind := b.submit(0, "true")
	var failing atomic.Bool // every commit from j's start on
	b.fs.markedOnly(func(jobs []store.Job) error {
		for _, r := range jobs {
			if r.ID == j.ID && r.State == store.StateRunning {
				failing.Store(true)
			}
		}
		if failing.Load() {
			return errInjected
		}
		return nil
	})
	release()
	b.waitOutput(j.ID, "started")
	poll(t, "the persistence failure", func() bool { return !b.s.Status().Persistence.OK })
	jRelease()
	held := b.wait(j.ID, "held", func(w Watch) bool { return w.Done })
	if *held.Info.ExitCode != 0 || !held.Info.Held {
		t.Fatalf("%+v", held.Info)
	}
	if info, _ := b.s.Job(behind.ID); info.State != store.StateQueued {
		t.Fatalf("the job behind while the store fails: %s", info.State)
	}
	b.fs.set(nil)
	b.waitDone(behind.ID)
	if rec, _ := b.st.Job(j.ID); rec.State != store.StateDone || *rec.ExitCode != 0 {
		t.Fatalf("stored after recovery: %+v", rec)
	}
}

// After a crash, a job whose record reads queued but whose card's slot
// in the start log names it at its attempt had started: it ends
// interrupted, is never run again, and what it left is killed (found by
// its marker, as no process of it was recorded). A slot that names an
// earlier attempt of a job queued again does not count, nor does a job
// the slot no longer names.
func TestRestart_AJobMarkedStartedIsInterruptedNotRunAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.s.Stop()
	ran := filepath.Join(b.work, "ran")
	zero, one := 0, 1
	now := time.Now()
	queued := func(seq uint64, card *int, cmd string, attempt int) store.Job {
		return store.Job{ID: store.NewID(), Seq: seq, Kind: store.KindJob, Device: card, Cmd: cmd + " >> " + ran, Cwd: b.work,
			Repeat: 1, Timeout: 60, State: store.StateQueued, SubmittedAt: now, Attempt: attempt, Retries: 2}
	}
	started := queued(1, &zero, "echo started", 1)
	behind := queued(2, &zero, "echo behind", 1)
	retried := queued(3, &one, "echo retried", 2)
	if err := b.st.Put(started, behind, retried); err != nil {
		t.Fatal(err)
	}
	for _, m := range []store.StartMark{{Card: 0, ID: behind.ID, Attempt: 1}, {Card: 0, ID: started.ID, Attempt: 1}, {Card: 1, ID: retried.ID, Attempt: 1}} {
		if err := b.fs.log.MarkStart(m.Card, m.ID, m.Attempt); err != nil {
			t.Fatal(err)
		}
	}
	left := exec.Command("sleep", "1000")
	left.Env = append(os.Environ(), runner.JobEnvVar+"="+started.ID)
	left.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := left.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { left.Process.Kill() })
	gone := make(chan struct{})
	go func() { left.Wait(); close(gone) }()

	b.start()
	info := b.waitDone(started.ID)
	if info.Outcome != store.OutcomeInterrupted || info.Iterations != 0 {
		t.Fatalf("the marked job after the restart: %s %q, %d iterations; want interrupted, not run", info.Outcome, info.Error, info.Iterations)
	}
	select {
	case <-gone:
	case <-time.After(20 * time.Second):
		t.Fatal("what the marked job left is alive 20 s after the restart")
	}
	for _, id := range []string{behind.ID, retried.ID} {
		if got := b.waitDone(id); *got.ExitCode != 0 {
			t.Fatalf("%+v", got.Job)
		}
	}
	data, _ := os.ReadFile(ran)
	if lines := strings.Fields(string(data)); len(lines) != 2 || strings.Contains(string(data), "started") {
		t.Fatalf("ran %q: want behind and retried, once each, and never the marked job", data)
	}
}

// A card the start log has no slot for (from store.StartSlots on) commits
// every start, as before the start log; its worker asks the log once, not
// before every start.
func TestQueue_ACardWithoutASlotCommitsItsStarts(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.Devices = []int{0, store.StartSlots} })
	for range 3 {
		j := b.submit(store.StartSlots, "true")
		if info := b.waitDone(j.ID); *info.ExitCode != 0 {
			t.Fatalf("%+v", info.Job)
		}
	}
	if n := b.fs.marks.Load(); n != 1 {
		t.Fatalf("the start log was asked to mark %d starts on a card it has no slot for; want 1", n)
	}
	if marks, err := b.fs.Marks(); err != nil || len(marks) != 0 {
		t.Fatalf("start log: %+v, %v; want no mark", marks, err)
	}
}
