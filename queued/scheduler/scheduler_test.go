package scheduler

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
)

func TestScheduler_FIFOPerCard(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	gate, release := b.gate()
	g := b.submit(0, gate)
	b.waitOutput(g.ID, "started")
	var ids []string
	for i := range 20 {
		info := b.submit(0, fmt.Sprintf("echo %d >> %s/order", i, b.work))
		if info.Position != i+1 {
			t.Fatalf("job %d position = %d", i, info.Position)
		}
		ids = append(ids, info.ID)
	}
	release()
	b.waitDone(g.ID)
	for _, id := range ids {
		if info := b.waitDone(id); *info.ExitCode != 0 || info.Outcome != store.OutcomeSuccess {
			t.Fatalf("%+v", info.Job)
		}
	}
	data, _ := os.ReadFile(filepath.Join(b.work, "order"))
	var want strings.Builder
	for i := range 20 {
		fmt.Fprintf(&want, "%d\n", i)
	}
	if string(data) != want.String() {
		t.Fatalf("order:\n%s", data)
	}
}

func TestScheduler_CardsAreIndependent(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	gate, release := b.gate()
	g := b.submit(0, gate)
	b.waitOutput(g.ID, "started")
	j := b.submit(1, "echo card $TT_QUEUE_DEVICE job $TT_QUEUE_JOB_ID")
	info := b.waitDone(j.ID)
	if info.Card() != 1 || *info.ExitCode != 0 {
		t.Fatalf("%+v", info.Job)
	}
	if got := output(t, b, j.ID); got != "card 1 job "+j.ID+"\n" {
		t.Fatalf("output = %q", got)
	}
	if w, _ := b.s.Watch(g.ID); w.Info.State != store.StateRunning {
		t.Fatalf("gate state = %s", w.Info.State)
	}
	release()
	b.waitDone(g.ID)
}

func TestScheduler_EnvAndCwd(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) {
		o.BaseEnv = []string{"PATH=" + os.Getenv("PATH"), "KEEP=base", "OVER=base", "TT_QUEUE_JOB_ID=outer"}
	})
	info, err := b.s.Submit(JobSpec{Card: 0, Cwd: b.work, Env: map[string]string{"OVER": "job", "NEW": "x y"},
		Cmd: `echo "$PWD|$KEEP|$OVER|$NEW|$TT_QUEUE_DEVICE|${TT_VISIBLE_DEVICES-unset}"; env | grep -c ^TT_QUEUE_JOB_ID=`})
	if err != nil {
		t.Fatal(err)
	}
	b.waitDone(info.ID)
	if got := output(t, b, info.ID); got != b.work+"|base|job|x y|0|unset\n1\n" {
		t.Fatalf("output = %q", got)
	}
}

func TestScheduler_RepeatAndTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	rep, err := b.s.Submit(JobSpec{Card: 0, Cwd: b.work, Repeat: 5,
		Cmd: `echo x >> count; [ "$(wc -l < count)" -lt 3 ]`})
	if err != nil {
		t.Fatal(err)
	}
	to, err := b.s.Submit(JobSpec{Card: 1, Cwd: b.work, Timeout: time.Second, Cmd: "sleep 1000"})
	if err != nil {
		t.Fatal(err)
	}
	info := b.waitDone(rep.ID)
	if *info.ExitCode != 1 || info.Iterations != 3 || info.Outcome != store.OutcomeFailure || !strings.Contains(info.Error, "iteration 3 of 5") {
		t.Fatalf("repeat: %+v", info.Job)
	}
	info = b.waitDone(to.ID)
	if *info.ExitCode != -9 || info.Outcome != store.OutcomeTimeout || info.Timeout != 1 || !strings.Contains(info.Error, "timed out") {
		t.Fatalf("timeout: %+v", info.Job)
	}
}

func TestScheduler_Kill(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	run := b.submit(0, "echo started; sleep 1000")
	queued := b.submit(0, "echo never")
	b.waitOutput(run.ID, "started")

	info, err := b.s.Kill(queued.ID)
	if err != nil || info.State != store.StateDone || *info.ExitCode != -1 || info.Outcome != store.OutcomeKilled {
		t.Fatalf("kill queued: %+v, %v", info.Job, err)
	}
	if info, err = b.s.Kill(run.ID); err != nil || info.State != store.StateRunning {
		t.Fatalf("kill running: %+v, %v", info.Job, err)
	}
	done := b.waitDone(run.ID)
	if *done.ExitCode != -2 || done.Outcome != store.OutcomeKilled || done.Error != "killed by request" {
		t.Fatalf("killed: %+v", done.Job)
	}
	if _, err := b.s.Kill(run.ID); !errors.Is(err, ErrFinished) {
		t.Fatalf("kill done = %v", err)
	}
	if _, err := b.s.Kill(store.NewID()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("kill unknown = %v", err)
	}
	rec, err := b.st.Job(queued.ID)
	if err != nil || rec.State != store.StateDone || rec.Outcome != store.OutcomeKilled {
		t.Fatalf("stored killed job: %+v, %v", rec, err)
	}
}

func TestScheduler_BoundedLog(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.MaxLogBytes = 1000 })
	info := b.waitDone(b.submit(0, "head -c 100000 /dev/zero | tr '\\0' x; echo; echo end").ID)
	marker := runner.CutMarker(99005)
	if !info.LogTruncated || info.DroppedLogBytes != 99005 || info.LogBytes != 100005 || info.LogCutAt != 500 || info.LogCutBytes != 99005 {
		t.Fatalf("%+v", info.Job)
	}
	if got := output(t, b, info.ID); got != strings.Repeat("x", 500)+marker+strings.Repeat("x", 495)+"\nend\n" {
		t.Fatalf("not head, marker and tail: %q ... %q", got[:20], got[len(got)-80:])
	}
}

func TestScheduler_Limits(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.MaxQueued = 3 })
	gate, release := b.gate()
	g := b.submit(0, gate)
	b.waitOutput(g.ID, "started") // running jobs do not count
	for range 3 {
		b.submit(0, "true")
	}
	if _, err := b.s.Submit(JobSpec{Card: 1, Cmd: "true", Cwd: b.work}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("fourth queued = %v", err)
	}
	if _, err := b.s.Submit(JobSpec{Card: 7, Cmd: "true", Cwd: b.work}); !errors.Is(err, ErrUnknownCard) {
		t.Fatalf("card 7 = %v", err)
	}
	if st := b.s.Status(); st.Queued != 3 || st.MaxQueued != 3 {
		t.Fatalf("status queued = %d/%d", st.Queued, st.MaxQueued)
	}
	release()
}

func TestScheduler_ResolveAndLookup(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	info := b.waitDone(b.submit(0, "true").ID)
	for _, p := range []string{info.ID, info.ID[:6], info.ID[:20]} {
		if id, err := b.s.Resolve(p); err != nil || id != info.ID {
			t.Fatalf("Resolve(%s) = %s, %v", p, id, err)
		}
	}
	if _, err := b.s.Resolve(strings.Repeat("0", 32)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown = %v", err)
	}
	// Two records sharing a prefix, stored as new jobs: whole.
	a, c := info.WithSpec(info.Spec()), info.WithSpec(info.Spec())
	a.ID, c.ID = "abcdef"+strings.Repeat("0", 26), "abcdef"+strings.Repeat("1", 26)
	if err := b.st.Put(a, c); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.Resolve("abcdef"); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("ambiguous = %v", err)
	}
	got, err := b.s.Job(info.ID)
	if err != nil || got.State != store.StateDone || got.Position != 0 {
		t.Fatalf("Job = %+v, %v", got, err)
	}
}

func TestScheduler_StopInterruptsRunningKeepsQueued(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	run := b.submit(0, "echo started; sleep 1000")
	q := b.submit(0, "echo later")
	b.waitOutput(run.ID, "started")
	b.s.Stop()
	if _, err := b.s.Submit(JobSpec{Card: 0, Cmd: "true", Cwd: b.work}); !errors.Is(err, ErrStopping) {
		t.Fatalf("submit after stop = %v", err)
	}
	rec, err := b.st.Job(run.ID)
	if err != nil || rec.State != store.StateDone || *rec.ExitCode != -1 || rec.Outcome != store.OutcomeInterrupted ||
		rec.Error != "interrupted by service stop" {
		t.Fatalf("running job after stop: %+v, %v", rec, err)
	}
	if rec, _ := b.st.Job(q.ID); rec.State != store.StateQueued {
		t.Fatalf("queued job after stop: %+v", rec)
	}
	b.start()
	if info := b.waitDone(q.ID); *info.ExitCode != 0 || output(t, b, q.ID) != "later\n" {
		t.Fatalf("queued job after restart: %+v", info.Job)
	}
}

// TestScheduler_RestartRecovery starts a scheduler on a store left as a
// crash leaves it: a running job whose process group is still alive, a
// running job whose group was never recorded, queued jobs on both cards, a
// record from before cards were recorded, and one for a card that is gone.
func TestScheduler_RestartRecovery(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.s.Stop()
	work := b.work
	mk := func(seq uint64, card *int, state store.State, cmd string) store.Job {
		return store.Job{ID: store.NewID(), Seq: seq, Kind: store.KindJob, Device: card, Cmd: cmd, Cwd: work,
			Timeout: 60, Repeat: 1, State: state, SubmittedAt: time.Now()}
	}
	zero, one, seven := 0, 1, 7
	recorded := mk(10, &zero, store.StateRunning, "sleep 1000")
	unrecorded := mk(11, &one, store.StateRunning, "sleep 1000")
	// Start their "leftover" processes as the dead daemon would have.
	startLeft := func(id string) *exec.Cmd {
		cmd := exec.Command("bash", "-c", "sleep 1000 & wait")
		cmd.Env = append(os.Environ(), runner.JobEnvVar+"="+id)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		return cmd
	}
	left1 := startLeft("not-in-env-" + recorded.ID)
	left2 := startLeft(unrecorded.ID)
	start, err := runner.StartTime("/proc", left1.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	recorded.PGID, recorded.LeaderStart = left1.Process.Pid, start
	exited := func(cmd *exec.Cmd) <-chan struct{} {
		ch := make(chan struct{})
		go func() { cmd.Wait(); close(ch) }()
		return ch
	}
	e1, e2 := exited(left1), exited(left2)
	out := func(n string) string { return fmt.Sprintf("echo %s >> %s/order", n, work) }
	q0a := mk(12, &zero, store.StateQueued, out("a"))
	legacy := mk(13, nil, store.StateQueued, out("legacy"))
	q0b := mk(14, &zero, store.StateQueued, out("b"))
	q1 := mk(15, &one, store.StateQueued, "true")
	gone := mk(16, &seven, store.StateQueued, "true")
	if err := b.st.Put(recorded, unrecorded, q0a, legacy, q0b, q1, gone); err != nil {
		t.Fatal(err)
	}

	b.start()
	for _, ch := range []<-chan struct{}{e1, e2} {
		select {
		case <-ch:
		case <-time.After(20 * time.Second):
			t.Fatal("leftover group still alive after recovery")
		}
	}
	for _, j := range []store.Job{recorded, unrecorded} {
		rec, err := b.st.Job(j.ID)
		if err != nil || rec.State != store.StateDone || *rec.ExitCode != -1 || rec.Error != "interrupted by service restart" {
			t.Fatalf("interrupted job: %+v, %v", rec, err)
		}
	}
	for _, j := range []store.Job{q0a, legacy, q0b, q1} {
		if info := b.waitDone(j.ID); *info.ExitCode != 0 {
			t.Fatalf("recovered job: %+v", info.Job)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(work, "order")); string(data) != "a\nlegacy\nb\n" {
		t.Fatalf("recovered order: %q", data)
	}
	rec, _ := b.st.Job(gone.ID)
	if rec.State != store.StateDone || !strings.Contains(rec.Error, "card 7 is no longer configured") {
		t.Fatalf("job for a missing card: %+v", rec)
	}
	// New submissions continue the sequence after the recovered ones.
	if info := b.submit(0, "true"); info.Seq <= gone.Seq {
		t.Fatalf("new seq %d after %d", info.Seq, gone.Seq)
	}
	// The interrupted jobs are never run again: a further restart leaves them be.
	first, _ := b.st.Job(recorded.ID)
	b.restart()
	if rec, _ := b.st.Job(recorded.ID); rec.Error != "interrupted by service restart" || !rec.FinishedAt.Equal(first.FinishedAt) {
		t.Fatalf("after second restart: %+v; first recorded %+v", rec, first)
	}
}

func TestScheduler_PersistenceFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	gate, release := b.gate()
	g := b.submit(0, gate)
	behind := b.submit(0, "echo behind")
	b.waitOutput(g.ID, "started")

	b.fs.set(always(errInjected))
	if _, err := b.s.Submit(JobSpec{Card: 1, Cmd: "true", Cwd: b.work}); !errors.Is(err, ErrPersistence) || !errors.Is(err, errInjected) {
		t.Fatalf("submit while failing = %v", err)
	}
	st := b.s.Status()
	if st.Persistence.OK || !strings.Contains(st.Persistence.Error, "injected") || st.Cards[1].Worker != "paused: persistence failing" {
		t.Fatalf("status while failing: %+v", st.Persistence)
	}
	// The running job keeps running and finishes; its record is held.
	release()
	held := b.wait(g.ID, "held", func(w Watch) bool { return w.Done })
	if !held.Info.Held || *held.Info.ExitCode != 0 {
		t.Fatalf("held: %+v", held.Info)
	}
	if rec, _ := b.st.Job(g.ID); rec.State != store.StateRunning {
		t.Fatalf("stored gate while failing: %+v", rec)
	}
	// Dispatch is stopped: the job behind stays queued.
	if info, _ := b.s.Job(behind.ID); info.State != store.StateQueued || b.s.Status().Persistence.Held != 1 {
		t.Fatalf("behind while failing: %+v", info.Job)
	}
	poll(t, "a few retries", func() bool { return b.s.Status().Persistence.Attempts >= 2 })

	b.fs.set(nil)
	b.waitDone(behind.ID)
	if st := b.s.Status(); !st.Persistence.OK || st.Persistence.Held != 0 {
		t.Fatalf("status after recovery: %+v", st.Persistence)
	}
	rec, err := b.st.Job(g.ID)
	if err != nil || rec.State != store.StateDone || *rec.ExitCode != 0 {
		t.Fatalf("held record after recovery: %+v, %v", rec, err)
	}
	b.waitDone(b.submit(1, "true").ID)
}

func TestScheduler_FailedStartIsUndone(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	gate, release := b.gate()
	g := b.submit(0, gate)
	b.waitOutput(g.ID, "started")
	next := b.submit(0, "echo ran >> "+b.work+"/ran")
	// Fail exactly the commit that would start next.
	b.fs.set(func(jobs []store.Job) error {
		for _, j := range jobs {
			if j.ID == next.ID && j.State == store.StateRunning {
				return errInjected
			}
		}
		return nil
	})
	release()
	poll(t, "failed start", func() bool { return !b.s.Status().Persistence.OK })
	info, _ := b.s.Job(next.ID)
	if info.State != store.StateQueued || info.Position != 1 {
		t.Fatalf("after failed start: %+v", info)
	}
	b.fs.set(nil)
	b.waitDone(next.ID)
	data, _ := os.ReadFile(filepath.Join(b.work, "ran"))
	if string(data) != "ran\n" {
		t.Fatalf("ran %q", data)
	}
	if rec, _ := b.st.Job(g.ID); rec.State != store.StateDone {
		t.Fatalf("gate record: %+v", rec)
	}
}

func TestScheduler_RecoveryWhileStoreFails(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.s.Stop()
	zero := 0
	run := store.Job{ID: store.NewID(), Seq: 1, Kind: store.KindJob, Device: &zero, Cmd: "true", Cwd: b.work,
		Repeat: 1, State: store.StateRunning, SubmittedAt: time.Now()}
	if err := b.st.Put(run); err != nil {
		t.Fatal(err)
	}
	b.fs.set(always(errInjected))
	b.start()
	info, err := b.s.Job(run.ID)
	if err != nil || !info.Held || info.Error != "interrupted by service restart" || b.s.Status().Persistence.OK {
		t.Fatalf("held recovery: %+v, %v", info, err)
	}
	b.fs.set(nil)
	poll(t, "recovery", func() bool { return b.s.Status().Persistence.OK })
	if rec, _ := b.st.Job(run.ID); rec.State != store.StateDone {
		t.Fatalf("stored: %+v", rec)
	}
}

func TestScheduler_Retention(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	b := setup(t, func(o *Options) { o.Now = clk.Now; o.MaxCompleted = 3; o.RetentionDays = 30 })
	var ids []string
	for i := range 5 {
		clk.Advance(time.Minute)
		ids = append(ids, b.waitDone(b.submit(i%2, "echo "+strconv.Itoa(i)).ID).ID)
	}
	// An output file nobody owns is swept at start.
	orphan := filepath.Join(b.opt.OutputDir, store.NewID()+".log")
	os.WriteFile(orphan, []byte("x"), 0o600)

	b.restart()
	poll(t, "retention at start", func() bool { return !b.s.Status().Retention.LastRun.IsZero() })
	if st := b.s.Status().Retention; st.Deleted != 2 || st.Warning != "" {
		t.Fatalf("retention: %+v", st)
	}
	for i, id := range ids {
		_, err := b.st.Job(id)
		_, ferr := os.Stat(b.s.OutputPath(id))
		if gone := i < 2; gone != errors.Is(err, store.ErrNotFound) || gone != errors.Is(ferr, os.ErrNotExist) {
			t.Fatalf("job %d: record %v, file %v", i, err, ferr)
		}
	}
	if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("orphan output kept: %v", err)
	}

	// 31 days later everything finished is old. One output file cannot be
	// removed (a non-empty directory in its place): a warning, not a stop.
	os.Remove(b.s.OutputPath(ids[4]))
	os.MkdirAll(filepath.Join(b.s.OutputPath(ids[4]), "x"), 0o700)
	clk.Advance(31 * 24 * time.Hour)
	b.restart()
	poll(t, "retention at start", func() bool { return !b.s.Status().Retention.LastRun.IsZero() })
	st := b.s.Status()
	if st.Retention.Deleted != 3 || !strings.Contains(st.Retention.Warning, ids[4]) || !st.Persistence.OK {
		t.Fatalf("retention: %+v", st.Retention)
	}
	if fin, _ := b.st.Finished(); len(fin) != 0 {
		t.Fatalf("finished left: %v", fin)
	}
	b.waitDone(b.submit(0, "true").ID)
}

// TestScheduler_AJobWhoseSpecCannotBeReadFailsUnrun: a start reads only
// the job's spec from the store (its brief record is in memory); when
// that read fails (here the store holds no spec for a brief record), the
// job fails saying so and its program never runs, not even the preview
// of its command. The next job, whose spec reads, runs.
func TestScheduler_AJobWhoseSpecCannotBeReadFailsUnrun(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	missing := fmt.Errorf("job record: %w", store.ErrNoSpec)
	b.fs.specFault.Store(&missing)
	ran := filepath.Join(b.work, "ran")
	info := b.submit(0, "touch "+ran)
	done := b.waitDone(info.ID)
	if done.Outcome != store.OutcomeFailure || !strings.Contains(done.Error, "command and environment") || !strings.Contains(done.Error, info.ID) || done.Iterations != 0 {
		t.Errorf("job whose spec is missing: %s %q (%d iterations)", done.Outcome, done.Error, done.Iterations)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("a job whose spec could not be read ran")
	}
	b.fs.specFault.Store(nil)
	info = b.submit(0, "touch "+ran)
	if done := b.waitDone(info.ID); done.Outcome != store.OutcomeSuccess {
		t.Fatalf("the next job: %s %q", done.Outcome, done.Error)
	}
	if _, err := os.Stat(ran); err != nil {
		t.Fatalf("the next job did not run: %v", err)
	}
}
