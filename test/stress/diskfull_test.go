//go:build stress

package stress

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/test/stress/queuedproc"
)

// TestDiskFull puts the state directory on a 2 MiB tmpfs and fills it up
// under a running daemon: submissions get 503, /status shows the failure,
// no card dispatches, a job that ends meanwhile has its record held in
// memory; once the filler is deleted, dispatch resumes and every
// acknowledged job finishes, also across a restart. (Write faults
// injected at every transition are tested in package queued/scheduler and
// queued/server; this is the real thing.)
func TestDiskFull(t *testing.T) {
	mnt, state, logPath, work := onTmpfs(t, "2m")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := startIn(t, state, logPath, "")
	c := d.Client()
	defer c.Close()

	gate, g := runGate(ctx, t, c, work)
	var acked []string
	for range 50 {
		r, err := c.Queue(ctx, api.QueueRequest{Cmd: "/bin/true", Cwd: work, DeviceID: "0"})
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, r.JobID)
	}

	filler := filepath.Join(mnt, "filler")
	fill(t, filler)

	// Card 1 keeps taking and running jobs until a write fails.
	var accepted int
	for {
		r, err := c.Queue(ctx, api.QueueRequest{Cmd: "/bin/true", Cwd: work, DeviceID: "1"})
		if err == nil {
			acked = append(acked, r.JobID)
			accepted++
			if accepted > 5000 {
				t.Fatal("5000 submissions accepted on a full disk")
			}
			continue
		}
		if !api.IsStatus(err, 503) {
			t.Fatalf("submitting on a full disk: %v, want 503", err)
		}
		break
	}
	st, err := queuedproc.WaitStatus(ctx, c, func(st api.Status) bool { return !st.Persistence.OK })
	if err != nil {
		t.Fatal(err)
	}
	if st.Persistence.Error == "" || st.Persistence.Since == nil {
		t.Errorf("persistence failing without error or since: %+v", st.Persistence)
	}
	t.Logf("full disk: %d more submissions accepted, then 503; /status: %q", accepted, st.Persistence.Error)

	// The gate job ends while writes fail: its record is held, and card 0
	// starts nothing after it.
	if err := gate.Open(ctx); err != nil {
		t.Fatal(err)
	}
	gj, err := c.WaitResult(ctx, g.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if !gj.Held || gj.ExitCode == nil || *gj.ExitCode != 0 {
		t.Errorf("gate job while the disk is full: held %v exit %s, want held with exit 0", gj.Held, exitString(gj.ExitCode))
	}
	// A job card 1 started just before the failure may still be running;
	// once it ends, neither card may start another.
	st, err = queuedproc.WaitStatus(ctx, c, func(st api.Status) bool {
		for _, cs := range st.Cards {
			if cs.Current != nil {
				return false
			}
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Persistence.OK || st.Persistence.HeldRecords < 1 || st.Persistence.Since == nil {
		t.Errorf("persistence during the failure: %+v", st.Persistence)
	}
	failedAt := *st.Persistence.Since
	for _, cs := range st.Cards {
		if !strings.HasPrefix(cs.Worker, "paused") {
			t.Errorf("card %s worker %q on a full disk, want paused", cs.DeviceID, cs.Worker)
		}
	}
	if len(st.Cards) > 0 && len(st.Cards[0].Pending) != 50 {
		t.Errorf("card 0 has %d pending on a full disk, want 50", len(st.Cards[0].Pending))
	}
	if _, err := c.Queue(ctx, api.QueueRequest{Cmd: "/bin/true", Cwd: work}); !api.IsStatus(err, 503) {
		t.Errorf("submission during the failure: %v, want 503", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	st, err = queuedproc.WaitStatus(ctx, c, func(st api.Status) bool { return st.Persistence.OK })
	if err != nil {
		t.Fatal(err)
	}
	resumed := time.Since(freed)
	resumedAt := time.Now()
	if st.Persistence.HeldRecords != 0 {
		t.Errorf("held records after recovery: %d", st.Persistence.HeldRecords)
	}
	jobs, err := queuedproc.WaitDone(ctx, d, append(acked, g.JobID), 8)
	if err != nil {
		t.Fatal(err)
	}
	checkAllOK(t, jobs)
	if jobs[g.JobID].Held {
		t.Errorf("gate job still held after recovery")
	}
	for id, j := range jobs {
		if j.StartedAt != nil && !j.StartedAt.Before(failedAt) && j.StartedAt.Before(freed) {
			t.Errorf("job %s started at %v, while writes were failing (%v to %v)", id, j.StartedAt, failedAt, resumedAt)
		}
	}
	t.Logf("filler deleted: writes resumed after %v; all %d acknowledged jobs finished with exit 0", resumed.Round(time.Millisecond), len(acked))

	// And they are durable: a restarted daemon has every one, done.
	if err := d.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	d2 := startIn(t, state, logPath, "")
	jobs, err = queuedproc.WaitDone(ctx, d2, append(acked, g.JobID), 8)
	if err != nil {
		t.Fatal(err)
	}
	checkAllOK(t, jobs)
}

// runGate queues a job on card 0 that runs until gate opens, and waits
// until it runs: the card is busy and its queue held.
func runGate(ctx context.Context, t *testing.T, c *api.Client, work string) (*queuedproc.Gate, api.QueueResponse) {
	t.Helper()
	gate, err := queuedproc.NewGate(filepath.Join(work, "gate"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := c.Queue(ctx, api.QueueRequest{Cmd: gate.Cmd, Cwd: work, DeviceID: "0", Timeout: 120})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := queuedproc.WaitRunning(ctx, c, g.JobID); err != nil {
		t.Fatal(err)
	}
	return gate, g
}

// onTmpfs mounts a tmpfs of size (such as "2m") in a temp dir, unmounted
// at cleanup, and returns it with a state directory on it, and a log path
// and a work directory off it. It skips the test where mounting needs a
// root it does not have.
func onTmpfs(t *testing.T, size string) (mnt, state, logPath, work string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	mnt = filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("skipping: cannot mount a %s tmpfs on %s: %v", size, mnt, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, 0); err != nil {
			t.Errorf("unmounting %s: %v", mnt, err)
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
	state, logPath, work = filepath.Join(mnt, "state"), filepath.Join(dir, "queued.log"), filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	return mnt, state, logPath, work
}

func checkAllOK(t *testing.T, jobs map[string]api.Job) {
	t.Helper()
	for id, j := range jobs {
		if !j.Done() || j.ExitCode == nil || *j.ExitCode != 0 {
			t.Errorf("job %s: state %s exit %s error %q", id, j.State, exitString(j.ExitCode), j.Error)
		}
	}
}

// fill writes to path until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for range 1 << 20 {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
	t.Fatal("the tmpfs never filled up")
}
