package server

import (
	"errors"
	"github.com/ttkit/ttkit/queued/api"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestAPI_DiskFullOnTmpfs fills a real filesystem under a running daemon:
// submissions get 503 and /status shows the failure, the running job keeps
// running and its record is held, and once space is freed the daemon
// recovers on its own with nothing lost. It needs root to mount a tmpfs.
func TestAPI_DiskFullOnTmpfs(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("skipped: mounting a tmpfs needs root; TestAPI_PersistenceFailureInjected covers the same path with an injected fault")
	}
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=2m,mode=0700"); err != nil {
		t.Skipf("skipped: cannot mount a tmpfs (%v); TestAPI_PersistenceFailureInjected covers the same path", err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	state := filepath.Join(mnt, "state")
	d := start(t, options{dir: state})
	gate, release := d.gate()
	g := d.queue("0", gate)
	d.waitOutput(g.JobID, "started")

	// Fill the filesystem.
	filler, err := os.Create(filepath.Join(mnt, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := filler.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	filler.Close()

	// Submissions fill what is left of the store's pages, then fail.
	var refused error
	var accepted []string
	for i := 0; i < 2000 && refused == nil; i++ {
		var r api.QueueResponse
		r, refused = d.client.Queue(d.ctx(), api.QueueRequest{Cmd: "echo " + strings.Repeat("x", 1000), Cwd: d.work, DeviceID: "0"})
		if refused == nil {
			accepted = append(accepted, r.JobID)
		}
	}
	if !api.IsStatus(refused, http.StatusServiceUnavailable) || !strings.Contains(refused.Error(), "no space left") {
		t.Fatalf("submission on a full disk: %v", refused)
	}
	st, err := d.client.Status(d.ctx())
	if err != nil || st.Persistence.OK || !strings.Contains(st.Persistence.Error, "no space left") {
		t.Fatalf("status on a full disk: %+v, %v", st.Persistence, err)
	}

	// The running job ends while the disk is full: its record is held.
	release()
	j, err := d.client.Result(d.ctx(), g.JobID, api.MaxWait)
	if err != nil || !j.Done() || !j.Held || *j.ExitCode != 0 {
		t.Fatalf("held result %+v, %v", j, err)
	}

	// Free the space: the daemon recovers by itself and runs the rest.
	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
		t.Fatal(err)
	}
	poll(t, "recovery", func() bool { st, _ := d.client.Status(d.ctx()); return st.Persistence.OK })
	rec, err := d.st.Job(g.JobID)
	if err != nil || rec.State != "done" || *rec.ExitCode != 0 {
		t.Fatalf("gate record after recovery: %+v, %v", rec, err)
	}
	last := d.queue("0", "echo last")
	if j := d.result(last.JobID); *j.ExitCode != 0 {
		t.Fatalf("after recovery: %+v", j)
	}
	for _, id := range accepted {
		if j := d.result(id); *j.ExitCode != 0 {
			t.Fatalf("job accepted before the disk filled: %+v", j)
		}
	}
}
