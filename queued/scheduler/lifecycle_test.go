package scheduler

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/store"
)

// blockStart makes the commit of the running record of the job whose
// command is cmd wait until release is called; reached closes when it is
// waiting. Only the first such commit waits.
func (b *bundle) blockStart(cmd string) (reached <-chan struct{}, release func()) {
	r, open := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b.fs.set(func(jobs []store.Job) error {
		for _, j := range jobs {
			if j.Cmd == cmd && j.State == store.StateRunning {
				once.Do(func() {
					close(r)
					<-open
				})
			}
		}
		return nil
	})
	return r, func() { close(open) }
}

// TestScheduler_StopDuringDispatchKeepsTheJobQueued stops the service
// while a job is taken for dispatch but before its process starts: the
// job never ran, so it stays queued (durably, at the head of its card)
// and runs after the restart.
func TestScheduler_StopDuringDispatchKeepsTheJobQueued(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	cmd := "echo ran >> runs"
	reached, release := b.blockStart(cmd)
	j := b.submit(0, cmd)
	later := b.submit(0, "echo later >> runs")
	<-reached
	stopped := make(chan struct{})
	go func() { b.s.Stop(); close(stopped) }()
	poll(t, "the stop to begin", func() bool {
		b.s.core.mu.Lock()
		defer b.s.core.mu.Unlock()
		return b.s.core.stopping
	})
	release()
	<-stopped
	rec, err := b.st.Job(j.ID)
	if err != nil || rec.State != store.StateQueued || !rec.StartedAt.IsZero() || rec.Iterations != 0 {
		t.Fatalf("a job stopped before its process started: %+v, %v; want it queued", rec, err)
	}
	b.fs.set(nil)
	b.start()
	if got := b.waitDone(j.ID); *got.ExitCode != 0 || got.Iterations != 1 {
		t.Fatalf("after restart: %+v", got)
	}
	b.waitDone(later.ID)
	if data, _ := os.ReadFile(filepath.Join(b.work, "runs")); string(data) != "ran\nlater\n" {
		t.Fatalf("runs %q", data)
	}
}

// TestScheduler_ResetBeforeStartRequeuesTheJob: a reset that arrives
// while the card's next job is taken but not yet started puts the job back
// behind the reset; it runs afterwards instead of ending interrupted.
func TestScheduler_ResetBeforeStartRequeuesTheJob(t *testing.T) {
	t.Parallel()
	ctl := newControls(t)
	b := setup(t, func(o *Options) { o.Controls = ctl.options() })
	cmd := "echo ran >> runs"
	reached, release := b.blockStart(cmd)
	j := b.submit(0, cmd)
	<-reached
	card := 0
	out := make(chan []ResetOutcome, 1)
	go func() {
		res, err := b.s.Reset(ResetRequest{Card: &card})
		if err != nil {
			t.Error(err)
		}
		out <- res
	}()
	res := <-out
	release()
	got := b.waitDone(j.ID)
	if *got.ExitCode != 0 || got.Outcome != store.OutcomeSuccess || got.Iterations != 1 {
		t.Fatalf("job taken for dispatch when a reset came: %+v; want it run after the reset", got)
	}
	if r := b.waitDone(res[0].JobID); r.Outcome != store.OutcomeSuccess || !r.FinishedAt.Before(got.StartedAt) {
		t.Fatalf("reset %+v should have run before the job started at %s", r, got.StartedAt)
	}
}

// TestScheduler_ConcurrentKillsOfOneQueuedJob sends twenty kills of one
// queued job at once: exactly one takes effect, the others are answered
// as for a finished job, and the queued count stays exact.
func TestScheduler_ConcurrentKillsOfOneQueuedJob(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.MaxQueued = 3 })
	gate, open := b.gate()
	g := b.submit(0, gate)
	b.waitOutput(g.ID, "started")
	victim := b.submit(0, "echo victim")
	var once sync.Once
	inPut, releasePut := make(chan struct{}), make(chan struct{})
	b.fs.set(func(jobs []store.Job) error {
		for _, j := range jobs {
			if j.ID == victim.ID && j.State == store.StateDone {
				once.Do(func() { close(inPut); <-releasePut })
			}
		}
		return nil
	})
	var ok, finished, calling atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			calling.Add(1)
			_, err := b.s.Kill(victim.ID)
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, ErrFinished):
				finished.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	<-inPut
	poll(t, "every kill to be sent", func() bool { return calling.Load() == 20 })
	close(releasePut)
	wg.Wait()
	b.fs.set(nil)
	if ok.Load() != 1 || finished.Load() != 19 {
		t.Fatalf("%d kills took effect and %d were answered as finished; want 1 and 19", ok.Load(), finished.Load())
	}
	if st := b.s.Status(); st.Queued != 0 {
		t.Fatalf("status counts %d queued; want 0", st.Queued)
	}
	for i := range 3 {
		b.submit(0, "true")
		_ = i
	}
	if _, err := b.s.Submit(JobSpec{Card: 0, Cmd: "true", Cwd: b.work}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("a fourth job with a limit of 3: %v; want ErrQueueFull", err)
	}
	open()
}

// TestScheduler_KilledJobNeverReadsAsSuccess kills a fast repeating job:
// wherever the kill lands, the record says killed with a negative code.
func TestScheduler_KilledJobNeverReadsAsSuccess(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for range 10 {
		info, err := b.s.Submit(JobSpec{Card: 0, Cmd: "true", Cwd: b.work, Repeat: 1000000})
		if err != nil {
			t.Fatal(err)
		}
		poll(t, "a few iterations", func() bool {
			j, _ := b.s.Job(info.ID)
			return j.Iterations >= 3
		})
		if _, err := b.s.Kill(info.ID); err != nil {
			t.Fatal(err)
		}
		got := b.waitDone(info.ID)
		if got.Outcome != store.OutcomeKilled || *got.ExitCode >= 0 {
			t.Fatalf("killed job: outcome %s, exit %d; want killed with a negative code", got.Outcome, *got.ExitCode)
		}
	}
}

// TestScheduler_StartFailureIsNotAStart: a job whose working directory
// vanished before its turn fails without a start time or an iteration, and
// a reset asked for it is skipped as for a job that never ran.
func TestScheduler_StartFailureIsNotAStart(t *testing.T) {
	t.Parallel()
	ctl := newControls(t)
	b := setup(t, func(o *Options) { o.Controls = ctl.options() })
	gate, open := b.gate()
	g := b.submit(0, gate)
	b.waitOutput(g.ID, "started")
	dir := filepath.Join(t.TempDir(), "cwd")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	info, err := b.s.Submit(JobSpec{Card: 0, Cmd: "true", Cwd: dir, Repeat: 2})
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(dir)
	open()
	got := b.waitDone(info.ID)
	if got.Outcome != store.OutcomeFailure || *got.ExitCode != -1 || !got.StartedAt.IsZero() || got.Iterations != 0 {
		t.Fatalf("job that could not start: %+v; want failure, exit -1, no start time, no iteration", got.Job)
	}
	if !strings.Contains(got.Error, "working directory") {
		t.Fatalf("error %q does not name the working directory", got.Error)
	}
	res, err := b.s.Reset(ResetRequest{JobID: info.ID})
	if err != nil || len(res) != 1 || !res[0].Skipped || !strings.Contains(res[0].Reason, "has not run") {
		t.Fatalf("reset for a job that never started: %+v, %v; want it skipped", res, err)
	}
	if _, ok := learnable(&got.Job); ok {
		t.Fatal("a job that never started would teach the estimates a run time")
	}
}

// TestScheduler_FinishedJobsLeaveMemory: only active jobs stay in memory.
func TestScheduler_FinishedJobsLeaveMemory(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	var ids []string
	for range 5 {
		ids = append(ids, b.submit(1, "true").ID)
	}
	for _, id := range ids {
		b.waitDone(id)
	}
	poll(t, "finished jobs to leave memory", func() bool {
		b.s.core.mu.Lock()
		defer b.s.core.mu.Unlock()
		return len(b.s.core.jobs) == 0
	})
}

// TestScheduler_OmittedTimeoutStoresTheDefault: a job without a timeout
// stores the default, in seconds.
func TestScheduler_OmittedTimeoutStoresTheDefault(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.DefaultTimeout = 90 * time.Second })
	info := b.submit(1, "true")
	rec, err := b.st.Job(info.ID)
	if err != nil || rec.Timeout != 90 {
		t.Fatalf("stored timeout %d, %v; want the default 90", rec.Timeout, err)
	}
}

// TestScheduler_RecoveryRecordsTheOutput: a job found interrupted at start
// records its output file's real size, and whether it reached the cap.
func TestScheduler_RecoveryRecordsTheOutput(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.MaxLogBytes = 1000 })
	b.s.Stop()
	zero := 0
	mk := func(seq uint64) store.Job {
		return store.Job{ID: store.NewID(), Seq: seq, Kind: store.KindJob, Device: &zero, Cmd: "sleep 1000", Cwd: b.work,
			Timeout: 60, Repeat: 1, State: store.StateRunning, SubmittedAt: time.Now(), StartedAt: time.Now(), Iterations: 1}
	}
	short, capped, none := mk(20), mk(21), mk(22)
	if err := os.MkdirAll(b.opt.OutputDir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(id, data string) {
		if err := os.WriteFile(b.s.OutputPath(id), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(short.ID, "some output\n")
	write(capped.ID, strings.Repeat("x", 1000)) // its tail was in memory
	if err := b.st.Put(short, capped, none); err != nil {
		t.Fatal(err)
	}
	b.start()
	for _, tc := range []struct {
		id        string
		size      int64
		truncated bool
	}{{short.ID, 12, false}, {capped.ID, 1000, true}, {none.ID, 0, false}} {
		rec, err := b.st.Job(tc.id)
		if err != nil || rec.Outcome != store.OutcomeInterrupted || rec.LogBytes != tc.size || rec.LogTruncated != tc.truncated {
			t.Fatalf("recovered %s: log_bytes %d truncated %v (%v); want %d %v", tc.id[:8], rec.LogBytes, rec.LogTruncated, err, tc.size, tc.truncated)
		}
	}
}

// TestScheduler_AmbiguousPrefixNamesTheMatches: the error lists up to five
// of the matching ids, so the caller can pick one.
func TestScheduler_AmbiguousPrefixNamesTheMatches(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	var ids []string
	for range 7 {
		ids = append(ids, b.submit(1, "true").ID)
	}
	_, err := b.s.Resolve("")
	if !errors.Is(err, ErrAmbiguous) || !strings.Contains(err.Error(), "and more") || strings.Count(err.Error(), ", ") != 4 {
		t.Fatalf("Resolve of a prefix every job has: %v", err)
	}
	two := ids[0][:1]
	n := 0
	for _, id := range ids {
		if strings.HasPrefix(id, two) {
			n++
		}
	}
	if _, err := b.s.Resolve(two); n > 1 && (err == nil || !strings.Contains(err.Error(), ids[0])) {
		t.Fatalf("Resolve(%q) with %d matches: %v; want them named", two, n, err)
	}
}

// TestScheduler_ALongJobsProcessIsRecordedWhileItRuns: once a job has run
// pidWriteDelay since its process started, its durable record names that
// process (so a crash finds its group by record), and again for each
// iteration of a repeated job; a job that ends sooner carries its process
// in its done record. No goroutine is left behind (goleak, TestMain).
func TestScheduler_ALongJobsProcessIsRecordedWhileItRuns(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	gate, release := b.gate()
	info, err := b.s.Submit(JobSpec{Card: 0, Cmd: gate + "; echo $$ >> pids", Cwd: b.work, Repeat: 2})
	if err != nil {
		t.Fatal(err)
	}
	durable := func() store.Job {
		rec, err := b.st.Job(info.ID)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	b.waitOutput(info.ID, "started")
	poll(t, "the first iteration's process in the durable record", func() bool {
		rec := durable()
		return rec.State == store.StateRunning && rec.PGID > 0 && rec.LeaderStart > 0 && rec.Iterations == 1
	})
	first := durable().PGID
	release() // the gate stays open: the second iteration echoes and waits no more
	poll(t, "the second iteration's process in the durable record", func() bool {
		rec := durable()
		return rec.Iterations == 2 && rec.PGID > 0 && rec.PGID != first || rec.State == store.StateDone
	})
	done := b.waitDone(info.ID)
	if done.ExitCode == nil || *done.ExitCode != 0 {
		t.Fatalf("the job ended %+v", done.Job)
	}
	pids, err := os.ReadFile(filepath.Join(b.work, "pids"))
	if err != nil {
		t.Fatal(err)
	}
	if rec := durable(); rec.State != store.StateDone || strconv.Itoa(rec.PGID) != lastWord(string(pids)) {
		t.Fatalf("the done record names process %d after iterations %q; want the last one's", rec.PGID, pids)
	}

	short := b.submit(0, "echo $$ > short")
	b.waitDone(short.ID)
	pid, err := os.ReadFile(filepath.Join(b.work, "short"))
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := b.st.Job(short.ID); err != nil || strconv.Itoa(rec.PGID) != strings.TrimSpace(string(pid)) {
		t.Fatalf("a short job's done record names process %d (%v); it ran as %s", rec.PGID, err, pid)
	}
}

// lastWord is the last word of s.
func lastWord(s string) string {
	words := strings.Fields(s)
	if len(words) == 0 {
		return ""
	}
	return words[len(words)-1]
}
