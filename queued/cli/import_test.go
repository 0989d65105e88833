package cli_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/queued/api"
)

// hourAgo is a time of the Python tool's rows: recent, so that queued's
// retention (30 days) keeps the finished ones.
var hourAgo = float64(time.Now().Add(-time.Hour).Unix())

// legacyJob is a jobs row of the Python tool.
func legacyJob(id string, card any, status, cmd, cwd string, extra map[string]any) map[string]any {
	r := map[string]any{"id": id, "cmd": cmd, "cwd": cwd, "timeout": 60, "repeat": 1, "mode": "run",
		"submitted": hourAgo, "status": status, "device_id": card}
	for k, v := range extra {
		r[k] = v
	}
	return r
}

// TestImport_OnDaemonStart: queued started on the Python tool's state
// directory imports its database: queued jobs run on their card in the old
// order (the one without a card on card 0), the running one is
// interrupted, finished ones answer result and logs with their old output,
// and a card that died on this boot stays dead.
func TestImport_OnDaemonStart(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	order := filepath.Join(work, "order")
	d := startDaemonWith(t, func(state string) {
		out := filepath.Join(state, "aaaa0001", "output")
		os.MkdirAll(filepath.Dir(out), 0o700)
		if err := os.WriteFile(out, []byte("old output\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		kmdtest.MakeLegacyDB(t, map[string]any{"path": filepath.Join(state, "jobs.sqlite3"), "card_column": "device_id", "keep_wal": true,
			"rows": []map[string]any{
				legacyJob("aaaa0001", 0, "done", "python3 old.py", work, map[string]any{"exit_code": 3, "output_file": out,
					"started_at": hourAgo + 1, "finished_at": hourAgo + 5, "repeat_completed": 1}),
				legacyJob("bbbb0001", 0, "queued", "echo first >> "+order, work, nil),
				legacyJob("cccc0001", 0, "running", "sleep 1000", work, map[string]any{"started_at": hourAgo + 6}),
				legacyJob("dddd0001", 1, "queued", "echo never", work, nil),
				legacyJob("bbbb0002", nil, "queued", "echo second >> "+order, work, nil),
				legacyJob("bbbb0003", 0, "queued", "echo third >> "+order, work, nil),
			},
			"device_state": []map[string]any{
				{"device_id": 1, "state": "dead", "boot_id": kmdtest.BootID(t), "dead_reason": "health check failed", "dead_since": hourAgo + 7},
			}})
	})
	d.run("result", "bbbb0003").want(t, 0, nil, nil)
	if b, err := os.ReadFile(order); err != nil || string(b) != "first\nsecond\nthird\n" {
		t.Fatalf("the imported jobs ran in the order %q (%v), want first, second, third", b, err)
	}
	d.run("result", "aaaa0001").want(t, 3, []string{"old output\n"}, []string{"exit code 3"})
	d.run("logs", "aaaa0001").want(t, 0, []string{"old output\n"}, nil)
	if j := d.job("cccc0001"); j.Outcome != "interrupted" || *j.ExitCode != -1 {
		t.Fatalf("the running job was imported as %+v, want interrupted", j)
	}
	if j := d.job("dddd0001"); j.State != "done" || j.Outcome != "card_dead" {
		t.Fatalf("the dead card's queued job is %+v, want failed with its dead card", j)
	}
	var st api.Status
	r := d.run("--json", "status")
	decode(t, r, &st)
	if st.Cards[1].State != "dead" || st.Cards[1].DeadReason != "health check failed" || st.Cards[0].State != "healthy" {
		t.Fatalf("cards after import: %+v", st.Cards)
	}
}

// TestImport_Command: tt-device-queue import PATH refuses while queued
// uses the state directory, imports into one it does not, and only once.
func TestImport_Command(t *testing.T) {
	t.Parallel()
	old := t.TempDir()
	kmdtest.MakeLegacyDB(t, map[string]any{"path": filepath.Join(old, "jobs.sqlite3"),
		"rows": []map[string]any{
			{"id": "eeee0001", "cmd": "echo imported", "cwd": old, "status": "queued", "submitted": hourAgo},
			{"id": "eeee0002", "cmd": "true", "cwd": old, "status": "done", "exit_code": 0, "submitted": hourAgo},
		}})
	running := startDaemon(t)
	running.run("import", old).want(t, 1, nil, []string{"a queued is using " + running.state, "stop queued"})

	importInto := func(state string, args ...string) result {
		cmd := exec.Command(filepath.Join(bin, "tt-device-queue"), append([]string{"import"}, args...)...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TT_DEVICE_LOG_DIR=" + state}
		return runCmd(t, cmd)
	}
	var first, again result
	d := startDaemonWith(t, func(state string) {
		first = importInto(state, filepath.Join(old, "jobs.sqlite3"))
		again = importInto(state, old)
	})
	first.want(t, 0, []string{"imported 2 jobs", "1 queued", "1 finished"}, nil)
	again.want(t, 1, nil, []string{"already imported"})
	d.run("result", "eeee0001").want(t, 0, []string{"imported\n"}, nil)
	importInto(t.TempDir(), filepath.Join(old, "nothing-here")).want(t, 2, nil, []string{"nothing-here"})
}

// TestImport_PendingResetRunsFirstAndLastResetIsNamed: a reset the Python
// tool had pending runs on queued before the card's imported jobs; a
// card's last reset is shown by status and named by reset JOB for a job
// that ran before it.
func TestImport_PendingResetRunsFirstAndLastResetIsNamed(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	order := filepath.Join(work, "order")
	boot := kmdtest.BootID(t)
	d := startDaemonWith(t, func(state string) {
		kmdtest.MakeLegacyDB(t, map[string]any{"path": filepath.Join(state, "jobs.sqlite3"), "card_column": "device_id",
			"rows": []map[string]any{
				legacyJob("aaaa0001", 1, "done", "python3 old.py", work, map[string]any{"exit_code": 0, "reset_epoch": 0,
					"started_at": hourAgo + 1, "finished_at": hourAgo + 5}),
				legacyJob("ffff0001", 1, "done", "[device reset] tt-smi -r", "", map[string]any{"mode": "reset", "exit_code": 0,
					"started_at": hourAgo + 6, "finished_at": hourAgo + 9}),
				legacyJob("bbbb0001", 0, "queued", "echo job >> "+order, work, nil),
			},
			"device_state": []map[string]any{
				{"device_id": 0, "state": "healthy", "reset_pending": 1, "reset_epoch": 0, "boot_id": boot, "updated_at": hourAgo + 10},
				{"device_id": 1, "state": "healthy", "reset_pending": 0, "reset_epoch": 1, "boot_id": boot, "last_reset_at": hourAgo + 9, "updated_at": hourAgo + 9},
			}})
	}, "TT_DEVICE_RESET_CMD=echo reset >> "+order+" #")
	d.run("result", "bbbb0001").want(t, 0, nil, nil)
	if b, err := os.ReadFile(order); err != nil || string(b) != "reset\njob\n" {
		t.Fatalf("card 0 ran %q (%v), want the pending reset, then the job", b, err)
	}
	var st api.Status
	decode(t, d.run("--json", "status"), &st)
	if lr := st.Cards[1].LastReset; lr == nil || !strings.HasPrefix(lr.JobID, "ffff0001") || lr.Result != "ok" {
		t.Fatalf("card 1's last reset %+v, want ffff0001..., ok", lr)
	}
	d.run("status").want(t, 0, []string{"card 1: last reset ffff0001 ok"}, nil)
	d.run("reset", "aaaa0001").want(t, 0, []string{"card 1 was reset since job", "(reset ffff0001", "result ok)"}, nil)
}

// TestImport_QueuedRefusesToStartBesideTheLiveTool: queued started on the
// state directory of a Python tool that still runs (idle: it holds no
// file) exits with a message to stop the tool first, and writes no
// queue.db; the tool would otherwise run the same queue.
func TestImport_QueuedRefusesToStartBesideTheLiveTool(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	db := filepath.Join(state, "jobs.sqlite3")
	kmdtest.MakeLegacyDB(t, map[string]any{"path": db,
		"rows": []map[string]any{{"id": "eeee0001", "cmd": "echo twice", "cwd": state, "status": "queued", "submitted": hourAgo}}})
	repo := t.TempDir()
	script, err := os.ReadFile(filepath.Join(kmdtest.Testdata(t), "python-tool", "live_server.py"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(repo, "server.py"), script, 0o644)
	os.WriteFile(filepath.Join(repo, "queue_core.py"), nil, 0o644)
	py := exec.Command("python3", filepath.Join(repo, "server.py"), db, "0", "idle")
	py.Env = append(os.Environ(), "TT_DEVICE_LOG_DIR="+state)
	out, _ := py.StdoutPipe()
	if err := py.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { py.Process.Signal(syscall.SIGTERM); py.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the stand-in Python server: %q %v", line, err)
	}
	q := exec.Command(filepath.Join(bin, "queued"), "--listen", "127.0.0.1:0")
	q.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TT_DEVICE_LOG_DIR=" + state, "TT_DEVICE_IDS=0"}
	r := runCmd(t, q)
	r.want(t, 1, nil, []string{"is in use", "runs as process", "stop the Python tt-device-queue first"})
	if _, err := os.Stat(filepath.Join(state, "queue.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("queued wrote queue.db beside the live tool: %v", err)
	}
}
