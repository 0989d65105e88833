//go:build stress

package stress

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/fusetest"
	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/test/stress/queuedproc"
)

// hostileGrace is each of the daemon's two graces in the hostile rounds
// (SIGINT to SIGTERM, SIGTERM to SIGKILL).
const hostileGrace = 2 * time.Second

// hostileMargin is what a card may take beyond the graces to be free again:
// the SIGKILL landing, the leftover scan, the record.
const hostileMargin = 3 * time.Second

// TestHostileJobs runs, on four cards at once, jobs that try to outlive
// their end, and ends them all: by kill, by a reset of every card, and by
// their own timeout. The jobs:
//
//   - card 0 forks a hundred processes (within any sane TasksMax), half of
//     them in sessions of their own, half in process groups of their own;
//   - card 1 tries to join queued's process group, and leaves a child in a
//     session of its own;
//   - card 2 ignores SIGINT, and so do its children;
//   - card 3 never gets to run: its working directory, on a FUSE mount that
//     never answers, blocks in the kernel.
//
// Each round checks that every card is free again within the kill grace
// (plus a small margin): the job recorded done, no process carrying its
// marker left, and the next job on the card run.
func TestHostileJobs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the hostile round mounts FUSE and reads every process's environment: run as root (make stress does in CI)")
	}
	for _, end := range []string{"kill", "reset", "timeout"} {
		t.Run(end, func(t *testing.T) { hostileRound(t, end) })
	}
}

func hostileRound(t *testing.T, end string) {
	dir := t.TempDir()
	state, work, stuck := filepath.Join(dir, "state"), filepath.Join(dir, "work"), filepath.Join(dir, "stuck")
	for _, d := range []string{work, stuck} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	d, err := queuedproc.Start(queuedproc.Options{Bin: queuedBin, StateDir: state, Devices: "0,1,2,3",
		LogPath: filepath.Join(dir, "queued.log"),
		Env: []string{"TT_DEVICE_KILL_GRACE=" + strconv.Itoa(int(hostileGrace/time.Second)), "TT_DEVICE_TERM_GRACE=" + strconv.Itoa(int(hostileGrace/time.Second)),
			"TT_DEVICE_RESET_CMD=true #", "TT_DEVICE_HEALTH_CHECK_CMD=true"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(30 * time.Second) })
	c := d.Client()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	timeout := int64(0)
	if end == "timeout" {
		timeout = 4
	}
	queue := func(card, cwd, cmd string) string {
		t.Helper()
		q, err := c.Queue(ctx, api.QueueRequest{Cmd: cmd, Cwd: cwd, DeviceID: card, Timeout: timeout})
		if err != nil {
			t.Fatalf("queue on card %s: %v", card, err)
		}
		return q.JobID
	}
	// Card 3's job waits behind a gate, so its directory can be made to
	// hang after the submission looked at it.
	gate, err := queuedproc.NewGate(filepath.Join(dir, "gate"))
	if err != nil {
		t.Fatal(err)
	}
	gateJob, err := c.Queue(ctx, api.QueueRequest{Cmd: gate.Cmd, Cwd: work, DeviceID: "3"})
	if err != nil {
		t.Fatal(err)
	}
	jobs := []string{
		queue("0", work, `for i in $(seq 50); do setsid sleep 600 & done; set -m; for i in $(seq 50); do sleep 600 & done; echo up; wait`),
		queue("1", work, fmt.Sprintf(`python3 -c 'import os; os.setpgid(0, %d)' 2>/dev/null; setsid sleep 600 & echo up; exec sleep 600`, d.Pid)),
		queue("2", work, `trap '' INT; for i in $(seq 10); do sleep 600 & done; echo up; wait`),
		queue("3", stuck, "echo never"),
	}
	if _, err := queuedproc.WaitRunning(ctx, c, gateJob.JobID); err != nil {
		t.Fatal(err)
	}
	fusetest.HangOver(t, stuck)
	if err := gate.Open(ctx); err != nil {
		t.Fatal(err)
	}
	gateOpened := time.Now()
	for _, id := range jobs {
		j, err := queuedproc.WaitRunning(ctx, c, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.DeviceID != "3" {
			waitLog(t, ctx, c, id, "up")
		}
	}

	began := time.Now()
	switch end {
	case "kill":
		for _, id := range jobs {
			if _, err := c.Kill(ctx, id); err != nil {
				t.Fatalf("kill %s: %v", id, err)
			}
		}
	case "reset":
		if _, err := c.Reset(ctx, api.ResetRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	limit := 2*hostileGrace + hostileMargin // jobs that ignore SIGINT and SIGTERM climb the whole ladder
	if end == "timeout" {
		limit = time.Duration(timeout)*time.Second + 2*hostileGrace + hostileMargin
	}
	var wg sync.WaitGroup
	for i, id := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j, err := c.WaitResult(ctx, id)
			if err != nil {
				t.Errorf("card %d: %v", i, err)
				return
			}
			from := began
			if end == "timeout" {
				// The timeout runs from the job's start; one that never
				// started keeps no start time, and started at the gate.
				from = gateOpened
				if j.StartedAt != nil {
					from = *j.StartedAt
				}
			}
			for len(marked(id)) > 0 && time.Since(from) < limit+5*time.Second {
				time.Sleep(20 * time.Millisecond) // polling /proc for the job's leftovers
			}
			took := time.Since(from)
			if left := marked(id); len(left) > 0 {
				t.Errorf("card %d: processes %v of job %s outlived it", i, left, id)
			}
			if took > limit {
				t.Errorf("card %d: free again %v after the %s, want within %v (%s %q)", i, took.Round(time.Millisecond), end, limit, j.Outcome, j.Error)
			}
			t.Logf("card %d: %s after %v: %s %q", i, end, took.Round(time.Millisecond), j.Outcome, j.Error)
		}()
	}
	wg.Wait()
	// Every card runs its next job.
	for card := range 4 {
		cwd := work
		q, err := c.Queue(ctx, api.QueueRequest{Cmd: "echo next", Cwd: cwd, DeviceID: strconv.Itoa(card)})
		if err != nil {
			t.Fatal(err)
		}
		if j, err := c.WaitResult(ctx, q.JobID); err != nil || j.Outcome != "success" {
			t.Errorf("card %d's next job: %+v, %v", card, j, err)
		}
	}
}

// waitLog long-polls a job's output until it holds want.
func waitLog(t *testing.T, ctx context.Context, c *api.Client, id, want string) {
	t.Helper()
	var out []byte
	for !bytes.Contains(out, []byte(want)) {
		ch, err := c.Logs(ctx, id, api.LogsQuery{Offset: int64(len(out)), Wait: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ch.Data...)
		if ch.Done && !bytes.Contains(out, []byte(want)) {
			t.Fatalf("job %s ended without %q: %q", id, want, out)
		}
	}
}

// marked lists the live processes whose environment carries job id's
// marker.
func marked(id string) []int {
	mark := []byte("TT_QUEUE_JOB_ID=" + id + "\x00")
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(append(env, 0), mark) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i > 0 && len(st) > i+2 && st[i+2] == 'Z' {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}
