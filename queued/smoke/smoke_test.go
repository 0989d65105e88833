package smoke_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/friendlyname"
	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/smoke"
)

var queuedBin, smokeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "smoke-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-o", dir+"/", "github.com/ttkit/ttkit/queued/cmd/queued", "github.com/ttkit/ttkit/queued/cmd/tt-device-smoke")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building queued:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	queuedBin, smokeBin = filepath.Join(dir, "queued"), filepath.Join(dir, "tt-device-smoke")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// host is a fake card host: a KMD tree whose pids file lists whoever has
// the card's device file open (as the KMD does for the real node), a real
// queued serving card 0, and a stand-in for otelcol-tt's Prometheus
// endpoint that names each holder as the receiver does.
type host struct {
	tree    *kmdtest.Tree
	devDir  string
	dev     string
	client  *api.Client
	metrics *httptest.Server
	log     *bytes.Buffer
	python  string
	state   string
}

func newHost(t *testing.T, queuedEnv ...string) *host {
	t.Helper()
	root := t.TempDir()
	h := &host{tree: kmdtest.NewTree(t, filepath.Join(root, "driver")), devDir: filepath.Join(root, "dev"), log: &bytes.Buffer{}, python: kmdtest.Python(t)}
	h.tree.SetPids(0)
	h.dev = filepath.Join(h.devDir, "0")
	if err := os.MkdirAll(h.devDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.dev, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); h.fakeKMD(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })

	state, home := filepath.Join(root, "state"), filepath.Join(root, "home")
	h.state = state
	for _, d := range []string{state, home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(queuedBin, "--listen", "127.0.0.1:0")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TT_DEVICE_LOG_DIR=" + state,
		"TT_DEVICE_IDS=0", "TT_DEVICE_KILL_GRACE=1", "TT_DEVICE_DRIVER_PATH=" + h.tree.Dir,
		"TT_DEVICE_RESET_CMD=echo resetting card {device}", "TT_DEVICE_HEALTH_CHECK_CMD=echo card {device} is healthy"}, queuedEnv...)
	cmd.Stdout, cmd.Stderr = h.log, h.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Errorf("queued did not stop on SIGTERM:\n%s", h.log)
		}
	})
	h.client = api.NewUnixClient(filepath.Join(state, api.SocketFile))
	t.Cleanup(h.client.Close)
	waitFor(t, 15*time.Second, "queued to answer", func() bool {
		_, err := h.client.Status(context.Background())
		return err == nil
	})
	h.metrics = httptest.NewServer(http.HandlerFunc(h.serveMetrics))
	t.Cleanup(h.metrics.Close)
	return h
}

// fakeKMD keeps card 0's pids file listing the processes that have the
// device file open, one line per descriptor, as the KMD does.
func (h *host) fakeKMD(ctx context.Context) {
	for {
		var pids []int
		procs, _ := os.ReadDir("/proc")
		for _, p := range procs {
			pid, err := strconv.Atoi(p.Name())
			if err != nil {
				continue
			}
			fds, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
			for _, fd := range fds {
				if target, err := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name())); err == nil && target == h.dev {
					pids = append(pids, pid)
				}
			}
		}
		h.tree.SetPids(0, pids...)
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// serveMetrics answers as otelcol-tt's Prometheus exporter would: one
// tt_process series per holder in the pids file, named by friendlyname.
func (h *host) serveMetrics(w http.ResponseWriter, _ *http.Request) {
	b, _ := os.ReadFile(h.tree.PidsPath(0))
	fmt.Fprintln(w, "# HELP tt_process A host process that currently holds an open handle to a Tenstorrent KMD device.")
	fmt.Fprintln(w, "# TYPE tt_process gauge")
	seen := map[string]bool{}
	for _, pid := range strings.Fields(string(b)) {
		if seen[pid] {
			continue
		}
		seen[pid] = true
		raw, err := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		if err != nil {
			continue
		}
		line := strings.TrimSpace(strings.ReplaceAll(string(raw), "\x00", " "))
		fmt.Fprintf(w, "tt_process{command_line=%s,friendly_name=%s,hostname=\"fakehost\",pid=%q} 1\n",
			strconv.Quote(line), strconv.Quote(friendlyname.Derive(line)), pid)
	}
}

func (h *host) options() smoke.Options {
	return smoke.Options{
		Card: 0, Queued: h.client, QueuedAt: "the test's queued", MetricsURL: h.metrics.URL + "/metrics",
		DevDir: h.devDir, Python: h.python, KMDVersionFile: "/nonexistent/version",
		ResetTimeout: time.Minute, MetricsWait: 30 * time.Second,
	}
}

func waitFor(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSmokePassesOnFakeHost(t *testing.T) {
	h := newHost(t)
	var progress bytes.Buffer
	o := h.options()
	o.Progress = &progress
	r, err := smoke.Run(context.Background(), o)
	if err != nil {
		t.Fatalf("smoke.Run: %v\n%s", err, h.log)
	}
	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	t.Logf("report:\n%s", out.String())
	if !r.Passed || !strings.HasSuffix(out.String(), "PASS\n") {
		t.Fatalf("smoke test failed on a healthy fake host:\n%s\nqueued:\n%s", out.String(), h.log)
	}
	for _, want := range []string{"card 0 is healthy", "friendly_name=\"tt_smoke_holder.py\"", "opened " + h.dev, "exit 0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if !strings.Contains(progress.String(), "resetting card 0") {
		t.Errorf("no progress lines: %q", progress.String())
	}
	// The card is left idle.
	st, err := h.client.Status(context.Background())
	if err != nil || st.Cards[0].Current != nil || len(st.Cards[0].Pending) != 0 {
		t.Errorf("card not idle after the smoke test: %+v %v", st.Cards, err)
	}
}

func TestSmokeRefusesBusyCard(t *testing.T) {
	h := newHost(t)
	ctx := context.Background()

	// A process outside the queue holds the card.
	foreign := kmdtest.Start(t, t.TempDir(), nil, kmdtest.Python(t), "-c",
		"import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); print('ready', flush=True); sys.stdin.read()", h.dev)
	waitFor(t, 10*time.Second, "queued to see the foreign holder", func() bool {
		st, err := h.client.Status(ctx)
		return err == nil && len(st.Cards[0].Foreign) > 0
	})
	_, err := smoke.Run(ctx, h.options())
	if !errors.Is(err, smoke.ErrBusy) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", foreign.PID())) {
		t.Fatalf("with a foreign holder: err = %v, want ErrBusy naming pid %d", err, foreign.PID())
	}
	foreign.Stop()
	waitFor(t, 10*time.Second, "the foreign holder to go", func() bool {
		st, err := h.client.Status(ctx)
		return err == nil && len(st.Cards[0].Foreign) == 0
	})

	// A job runs and another waits.
	dir := t.TempDir()
	gate := filepath.Join(dir, "go")
	run, err := h.client.Queue(ctx, api.QueueRequest{Cmd: "while [ ! -e " + gate + " ]; do sleep 0.02; done", Cwd: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.Queue(ctx, api.QueueRequest{Cmd: "true", Cwd: dir}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the job to run", func() bool {
		j, err := h.client.Job(ctx, run.JobID)
		return err == nil && j.State == "running"
	})
	_, err = smoke.Run(ctx, h.options())
	if !errors.Is(err, smoke.ErrBusy) || !strings.Contains(err.Error(), run.JobID+" is running") || !strings.Contains(err.Error(), "1 jobs are queued") {
		t.Fatalf("with a running and a queued job: err = %v, want ErrBusy naming both", err)
	}
	os.WriteFile(gate, nil, 0o644)

	// A card queued does not serve is refused with the cards it does.
	o := h.options()
	o.Card = 7
	if _, err := smoke.Run(ctx, o); err == nil || !strings.Contains(err.Error(), "serves no card 7 (it serves 0)") {
		t.Fatalf("card 7: err = %v", err)
	}
}

// When otelcol-tt does not report the job, the smoke test fails that step
// and still ends the job, leaving the card idle.
func TestSmokeFailsWhenOtelcolMissesTheJob(t *testing.T) {
	h := newHost(t)
	empty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, `tt_process{command_line="python3 other.py",friendly_name="other.py",hostname="fakehost",pid="1"} 1`)
	}))
	defer empty.Close()
	o := h.options()
	o.MetricsURL, o.MetricsWait = empty.URL+"/metrics", 1500*time.Millisecond
	r, err := smoke.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r.WriteText(&out)
	if r.Passed || r.Metric.OK || !r.Job.OK || !strings.Contains(r.Metric.Detail, "no tt_process series for pid") || !strings.Contains(r.Metric.Detail, "1 tt_process series") {
		t.Fatalf("report:\n%s", out.String())
	}
	st, err := h.client.Status(context.Background())
	if err != nil || st.Cards[0].Current != nil {
		t.Errorf("card not idle: %+v %v", st.Cards, err)
	}
}

// A failing health check fails the reset step, and the job is not run.
func TestSmokeFailsWhenHealthCheckFails(t *testing.T) {
	h := newHost(t, "TT_DEVICE_HEALTH_CHECK_CMD=echo no card {device} >&2; exit 1")
	r, err := smoke.Run(context.Background(), h.options())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r.WriteText(&out)
	if r.Passed || r.Reset.OK || r.Job.Name != "" || !strings.Contains(out.String(), "reset      FAIL") {
		t.Fatalf("report:\n%s", out.String())
	}
}

// The command make smoke runs: the same test, its settings from flags and
// the environment, its verdict in the exit status.
func TestSmokeCommand(t *testing.T) {
	h := newHost(t)
	run := func(env ...string) (int, string, string) {
		cmd := exec.Command(smokeBin, "-dev-dir", h.devDir, "-python", h.python, "-metrics-wait", "30s")
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "TT_DEVICE_LOG_DIR=" + h.state, "SMOKE_METRICS_URL=" + h.metrics.URL + "/metrics"}, env...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), out.String(), errb.String()
	}
	if code, out, errs := run(); code != 0 || !strings.HasSuffix(out, "PASS\n") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if code, _, errs := run("SMOKE_CARD=7"); code != 2 || !strings.Contains(errs, "serves no card 7") {
		t.Fatalf("SMOKE_CARD=7: exit %d\n%s", code, errs)
	}
	foreign := kmdtest.Start(t, t.TempDir(), nil, h.python, "-c",
		"import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); print('ready', flush=True); sys.stdin.read()", h.dev)
	waitFor(t, 10*time.Second, "queued to see the foreign holder", func() bool {
		st, err := h.client.Status(context.Background())
		return err == nil && len(st.Cards[0].Foreign) > 0
	})
	if code, _, errs := run(); code != 3 || !strings.Contains(errs, "card is busy") {
		t.Fatalf("busy card: exit %d\n%s", code, errs)
	} else {
		t.Logf("busy card: exit %d\n%s", code, errs)
	}
	foreign.Stop()
}
