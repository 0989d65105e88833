package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ttkit/ttkit/queued/api"
)

func writeScript(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}

func (d *daemon) logs(id string) string {
	d.t.Helper()
	var out []byte
	for {
		ch, err := d.client.Logs(ctx(d.t), id, api.LogsQuery{Offset: int64(len(out)), Limit: api.MaxLogChunk})
		if err != nil {
			d.t.Fatal(err)
		}
		out = append(out, ch.Data...)
		if len(ch.Data) == 0 {
			return string(out)
		}
	}
}

// TestQueued_ResetWithTheDefaultCommands installs queued as a prefix does
// (bin/queued, share/tt-device-queue/health_check.py) and resets a card
// with the default commands, under a HOME whose ~/tenstorrent/.venv holds
// a fake tt-smi and a python3 that sees the stub tt_umd.
func TestQueued_ResetWithTheDefaultCommands(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is needed for the health check")
	}
	prefix, home, state := t.TempDir(), t.TempDir(), t.TempDir()
	exe := filepath.Join(prefix, "bin", "queued")
	copyFile(t, bin, exe, 0o755)
	copyFile(t, filepath.Join("..", "..", "health_check.py"), filepath.Join(prefix, "share", "tt-device-queue", "health_check.py"), 0o644)
	venv := filepath.Join(home, "tenstorrent", ".venv", "bin")
	calls := filepath.Join(home, "calls")
	writeScript(t, filepath.Join(venv, "tt-smi"), `echo "tt-smi $*" >> `+calls+"\necho resetting\n")
	writeScript(t, filepath.Join(venv, "python3"), `exec `+py+` -S "$@"`+"\n")
	stub, _ := filepath.Abs(filepath.Join("testdata", "stub"))
	devDir := filepath.Join(home, "dev")
	writeScript(t, filepath.Join(devDir, "1"), "") // any file stands for the device node

	d := startDaemonWith(t, state, exe, "HOME="+home, "PYTHONPATH="+stub, "TT_STUB_UMD=ok",
		"TT_STUB_UMD_LOG="+filepath.Join(home, "umd"), "TT_HEALTH_CHECK_DEV_DIR="+devDir)
	r, err := d.client.Reset(ctx(t), api.ResetRequest{DeviceID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	j, err := d.client.WaitResult(ctx(t), r.Resets[0].ResetJobID)
	if err != nil || j.Outcome != "success" {
		t.Fatalf("reset = %+v, %v\n%s", j, err, d.logs(r.Resets[0].ResetJobID))
	}
	log := d.logs(j.ID)
	for _, want := range []string{
		"== reset: ~/tenstorrent/.venv/bin/tt-smi -r /dev/tenstorrent/1 --no_reinit\nresetting\n",
		"== health check: ~/tenstorrent/.venv/bin/python3 " + filepath.Join(prefix, "share", "tt-device-queue", "health_check.py") + " 1\n",
		"card 1 healthy: AICLK 1000 MHz",
	} {
		if !strings.Contains(log, want) {
			t.Fatalf("reset log lacks %q:\n%s", want, log)
		}
	}
	if b, _ := os.ReadFile(calls); string(b) != "tt-smi -r /dev/tenstorrent/1 --no_reinit\n" {
		t.Fatalf("tt-smi calls %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "umd")); !strings.HasPrefix(string(b), "create 1\n") {
		t.Fatalf("tt_umd calls %q", b)
	}
}

// TestQueued_ResetsAndDeadCardsAcrossRestarts drives the real daemon: a
// reset stopped by SIGTERM is retried after the restart, and a card whose
// recovery failed stays dead across a restart on the same boot while the
// other card works.
func TestQueued_ResetsAndDeadCardsAcrossRestarts(t *testing.T) {
	t.Parallel()
	state, work := t.TempDir(), t.TempDir()
	gate := filepath.Join(work, "open")
	writeScript(t, filepath.Join(work, "reset"), `echo "reset $*" >> `+filepath.Join(work, "calls")+`
echo waiting
while [ ! -e `+gate+` ]; do sleep 0.01; done
`)
	writeScript(t, filepath.Join(work, "health"), `[ "$1" = 0 ]`+"\n") // card 0 recovers, card 1 does not
	extra := []string{"TT_DEVICE_RESET_CMD=" + filepath.Join(work, "reset"), "TT_DEVICE_HEALTH_CHECK_CMD=" + filepath.Join(work, "health") + " {device}"}
	d := startDaemonWith(t, state, bin, extra...)
	r, err := d.client.Reset(ctx(t), api.ResetRequest{DeviceID: "0"})
	if err != nil {
		t.Fatal(err)
	}
	id := r.Resets[0].ResetJobID
	d.waitOutput(id, "waiting")
	d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.exited
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	d = startDaemonWith(t, state, bin, extra...)
	j, err := d.client.WaitResult(ctx(t), id)
	if err != nil || j.Outcome != "success" {
		t.Fatalf("retried reset = %+v, %v", j, err)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "calls")); string(b) != "reset 0\nreset 0\n" {
		t.Fatalf("reset calls %q", b)
	}

	r, err = d.client.Reset(ctx(t), api.ResetRequest{DeviceID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if j, err := d.client.WaitResult(ctx(t), r.Resets[0].ResetJobID); err != nil || !strings.Contains(j.Error, "card 1 is dead") {
		t.Fatalf("failed reset = %+v, %v", j, err)
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.exited

	d = startDaemonWith(t, state, bin, extra...)
	_, err = d.client.Queue(ctx(t), api.QueueRequest{Cmd: "true", Cwd: work, DeviceID: "1"})
	if !api.IsStatus(err, http.StatusServiceUnavailable) || !strings.Contains(err.Error(), "card 1 is dead") {
		t.Fatalf("submit to the dead card after restart: %v", err)
	}
	if j, err := d.client.WaitResult(ctx(t), d.queue("0", work, "true")); err != nil || *j.ExitCode != 0 {
		t.Fatalf("card 0 job = %+v, %v", j, err)
	}
}

func TestQueued_ResetRefusedWithoutHealthCheckScript(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, t.TempDir()) // bin has no health_check.py installed beside it
	_, err := d.client.Reset(ctx(t), api.ResetRequest{DeviceID: "0"})
	if !api.IsStatus(err, http.StatusServiceUnavailable) || !strings.Contains(err.Error(), "TT_DEVICE_HEALTH_CHECK_CMD") {
		t.Fatalf("reset without a health check: %v", err)
	}
	if !strings.Contains(d.stderr.String(), "health_check.py is not installed") {
		t.Fatalf("no warning at start:\n%s", d.stderr.String())
	}
}
