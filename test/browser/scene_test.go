//go:build chromium

package browser

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/test/stress/queuedproc"
)

// scene is a real queued on two simulated cards with something to show:
// a finished reset on card 1, a training job running on card 0 with
// output and two jobs waiting behind it, an evaluation running on card 1,
// and a program holding card 1 outside the queue, listed in a simulated
// driver tree as the KMD would list it.
type scene struct {
	d      *queuedproc.Daemon
	c      *api.Client
	driver string
	work   string
	train  string // the running job on card 0
	eval   string // the running job on card 1
}

func startScene(t *testing.T) *scene {
	t.Helper()
	dir := t.TempDir()
	sc := &scene{driver: filepath.Join(dir, "driver"), work: filepath.Join(dir, "work")}
	progs := filepath.Join(dir, "progs")
	for _, p := range []string{filepath.Join(sc.driver, "0"), filepath.Join(sc.driver, "1"), progs, sc.work} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	// The workloads are sleep under telling names, so the page has
	// something to name.
	for _, name := range []string{"train_model", "eval_model", "rogue_benchmark"} {
		if err := os.Symlink(sleep, filepath.Join(progs, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"0", "1"} {
		if err := os.WriteFile(filepath.Join(sc.driver, n, "pids"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	logPath := filepath.Join(dir, "queued.log")
	sc.d, err = queuedproc.Start(queuedproc.Options{Bin: queuedBin, StateDir: filepath.Join(dir, "state"), LogPath: logPath,
		Env: []string{"PATH=" + progs + ":" + os.Getenv("PATH"), "TT_DEVICE_DRIVER_PATH=" + sc.driver,
			"TT_DEVICE_RESET_CMD=echo resetting card {device}", "TT_DEVICE_HEALTH_CHECK_CMD=true", "TT_DEVICE_KILL_GRACE=1", "TT_DEVICE_TERM_GRACE=1"}})
	if err != nil {
		t.Fatal(err)
	}
	sc.c = sc.d.Client()
	t.Cleanup(func() {
		sc.c.Close()
		if err := sc.d.Stop(20 * time.Second); err != nil {
			t.Errorf("stopping queued: %v", err)
		}
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("queued log:\n%s", b)
			}
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rs, err := sc.c.Reset(ctx, api.ResetRequest{DeviceID: "1"})
	if err != nil || len(rs.Resets) != 1 || rs.Resets[0].ResetJobID == "" {
		t.Fatalf("reset card 1: %+v, %v", rs, err)
	}
	if j, err := sc.c.WaitResult(ctx, rs.Resets[0].ResetJobID); err != nil || j.Outcome != "success" {
		t.Fatalf("the reset of card 1: %+v, %v", j, err)
	}
	sc.train = sc.queue(t, "0", `echo "loading weights from ckpt/step-4000"; echo "epoch 1/10  loss 2.314"; echo "epoch 2/10  loss 1.872"; exec train_model 600`)
	sc.queue(t, "0", "python3 eval.py --split val --batch 64")
	sc.queue(t, "0", "./bench.sh matmul 4096")
	sc.eval = sc.queue(t, "1", `echo "evaluating llama-3b on card $TT_QUEUE_DEVICE"; exec eval_model 600`)
	pids := map[string]int{}
	for _, id := range []string{sc.train, sc.eval} {
		deadline := time.Now().Add(30 * time.Second)
		for {
			j, err := sc.c.Job(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if j.PID != 0 {
				pids[id] = j.PID
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s did not start: %+v", id, j)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	rogue := exec.Command(filepath.Join(progs, "rogue_benchmark"), "600")
	if err := rogue.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rogue.Process.Signal(syscall.SIGKILL); rogue.Wait() })
	sc.hold(t, "0", pids[sc.train])
	sc.hold(t, "1", pids[sc.eval], rogue.Process.Pid)
	return sc
}

// queue submits cmd to card and returns the job id.
func (sc *scene) queue(t *testing.T, card, cmd string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := sc.c.Queue(ctx, api.QueueRequest{Cmd: cmd, Cwd: sc.work, DeviceID: card, ClientID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	return r.JobID
}

// hold writes the pids holding card into the simulated driver tree.
func (sc *scene) hold(t *testing.T, card string, pids ...int) {
	t.Helper()
	var b []byte
	for _, p := range pids {
		b = fmt.Appendf(b, "%s\n", strconv.Itoa(p))
	}
	if err := os.WriteFile(filepath.Join(sc.driver, card, "pids"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
