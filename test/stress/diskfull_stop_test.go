//go:build stress

package stress

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/test/stress/queuedproc"
)

// TestDiskFull_StopKeepsAnswers stops the daemon while its disk is full
// and starts it again once there is room: a kill refused during the
// failure left its job queued (and it runs), and a job that ended during
// the failure keeps the success it was answered with instead of reading
// "interrupted by service restart".
func TestDiskFull_StopKeepsAnswers(t *testing.T) {
	mnt, state, logPath, work := onTmpfs(t, "3m")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := startIn(t, state, logPath, "")
	c := d.Client()
	defer c.Close()

	gate, g := runGate(ctx, t, c, work)
	q, err := c.Queue(ctx, api.QueueRequest{Cmd: "echo q >> " + filepath.Join(work, "ran"), Cwd: work, DeviceID: "0"})
	if err != nil {
		t.Fatal(err)
	}

	filler := filepath.Join(mnt, "filler")
	fill(t, filler)
	for {
		_, err := c.Queue(ctx, api.QueueRequest{Cmd: "/bin/true", Cwd: work, DeviceID: "1"})
		if api.IsStatus(err, 503) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := queuedproc.WaitStatus(ctx, c, func(st api.Status) bool { return !st.Persistence.OK }); err != nil {
		t.Fatal(err)
	}
	_, err = c.Kill(ctx, q.JobID)
	var ae *api.Error
	if !api.IsStatus(err, 503) || !asAPIError(err, &ae) || !strings.Contains(ae.Message, "nothing changed") {
		t.Fatalf("kill of a queued job on a full disk: %v; want 503 saying nothing changed", err)
	}
	if err := gate.Open(ctx); err != nil {
		t.Fatal(err)
	}
	gj, err := c.WaitResult(ctx, g.JobID)
	if err != nil || !gj.Held || *gj.ExitCode != 0 {
		t.Fatalf("gate job on a full disk: %+v, %v; want held with exit 0", gj, err)
	}

	if err := d.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	d2 := startIn(t, state, logPath, "")
	c2 := d2.Client()
	defer c2.Close()
	if j, err := c2.Job(ctx, g.JobID); err != nil || j.Outcome != "success" || *j.ExitCode != 0 || j.Held {
		t.Fatalf("gate job after stop and restart: %+v, %v; want the success it was answered with", j, err)
	}
	if j, err := c2.WaitResult(ctx, q.JobID); err != nil || *j.ExitCode != 0 {
		t.Fatalf("job whose kill was refused: %+v, %v; want it run", j, err)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "ran")); string(b) != "q\n" {
		t.Fatalf("ran %q", b)
	}
}

func asAPIError(err error, target **api.Error) bool { return errors.As(err, target) }
