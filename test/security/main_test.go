package security

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/store"
	"github.com/ttkit/ttkit/test/stress/queuedproc"
)

// queuedBin is the daemon under test, built once by TestMain.
var queuedBin string

func TestMain(m *testing.M) { os.Exit(queuedproc.RunTests(m, &queuedBin)) }

// Jobs stored before the daemon starts: two whose ids share the prefix
// "abcdef" (so that prefix is ambiguous) and one more, all finished.
const (
	ambiguousA = "abcdef00000000000000000000000001"
	ambiguousB = "abcdef00000000000000000000000002"
	finishedID = "12345600000000000000000000000003"
)

// target is a daemon under attack.
type target struct {
	d     *queuedproc.Daemon
	state string
	// work is the directory hostile jobs would run in; every hostile cmd
	// creates a file there, so one that ran leaves a trace.
	work string
	// host is the daemon's host:port, the Host of a well-formed request.
	host string
}

// startTarget stores the finished jobs, starts the daemon, and at the end
// of the test stops it and checks that the store holds no job besides the
// stored ones and those the test names in sentinels.
func startTarget(t *testing.T) *target {
	t.Helper()
	dir := t.TempDir()
	tg := &target{state: filepath.Join(dir, "state"), work: filepath.Join(dir, "work")}
	if err := os.Mkdir(tg.work, 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(tg.state, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now, zero := time.Now(), 0
	var recs []store.Job
	for i, id := range []string{ambiguousA, ambiguousB, finishedID} {
		recs = append(recs, store.Job{ID: id, Seq: uint64(i + 1), Kind: store.KindJob, Device: &zero, Cmd: "true", Cwd: "/",
			Timeout: 60, Repeat: 1, State: store.StateDone, SubmittedAt: now, StartedAt: now, FinishedAt: now,
			ExitCode: &zero, Outcome: store.OutcomeSuccess, Iterations: 1})
	}
	if err := st.Put(recs...); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "queued.log")
	tg.d, err = queuedproc.Start(queuedproc.Options{Bin: queuedBin, StateDir: tg.state, LogPath: logPath})
	if err != nil {
		t.Fatal(err)
	}
	tg.host = strings.TrimPrefix(tg.d.URL, "http://")
	t.Cleanup(func() {
		if err := tg.d.Stop(20 * time.Second); err != nil {
			t.Errorf("stopping queued: %v", err)
		}
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("queued log:\n%s", b)
			}
		}
	})
	return tg
}

// hostileCmd is a cmd that leaves a file named for its request if it runs.
func (tg *target) hostileCmd(name string) string {
	return "touch " + filepath.Join(tg.work, "ran-"+strings.NewReplacer("/", "_", " ", "_").Replace(name))
}

// assertNothingEnqueued checks that no hostile request queued or ran a
// job: it submits one sentinel job per card and waits for it (cards are
// FIFO, so anything queued before has run by then), then checks that no
// hostile command left a file, no output file besides the sentinels'
// exists, and, once the daemon has stopped, that the store holds only the
// stored jobs and the sentinels.
func (tg *target) assertNothingEnqueued(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := tg.d.Client()
	defer c.Close()
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Queued != 0 {
		t.Errorf("status: %d jobs queued after hostile requests", st.Queued)
	}
	for _, cs := range st.Cards {
		if cs.Current != nil {
			t.Errorf("card %s is running job %s after hostile requests", cs.DeviceID, cs.Current.ID)
		}
	}
	sentinels := map[string]bool{}
	for _, card := range []string{"0", "1"} {
		r, err := c.Queue(ctx, api.QueueRequest{Cmd: "true", Cwd: tg.work, DeviceID: card})
		if err != nil {
			t.Fatal(err)
		}
		if j, err := c.WaitResult(ctx, r.JobID); err != nil || j.ExitCode == nil || *j.ExitCode != 0 {
			t.Fatalf("sentinel job on card %s: %+v %v", card, j, err)
		}
		sentinels[r.JobID] = true
	}
	ran, err := filepath.Glob(filepath.Join(tg.work, "ran-*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ran {
		t.Errorf("a hostile request ran a job: %s exists", filepath.Base(f))
	}
	outputs, err := os.ReadDir(filepath.Join(tg.state, "output"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range outputs {
		if !sentinels[strings.TrimSuffix(e.Name(), ".log")] {
			t.Errorf("output file %s belongs to no sentinel", e.Name())
		}
	}
	if err := tg.d.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(tg.state, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	active, err := s.Active()
	if err != nil {
		t.Fatal(err)
	}
	finished, err := s.Finished()
	if err != nil {
		t.Fatal(err)
	}
	if len(active) != 0 || len(finished) != 3+len(sentinels) {
		t.Errorf("store holds %d active and %d finished jobs, want 0 and %d (the stored ones and the sentinels)",
			len(active), len(finished), 3+len(sentinels))
	}
}
