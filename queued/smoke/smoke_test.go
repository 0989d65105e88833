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
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/smoke"
	"github.com/ttkit/ttkit/queued/smoke/smoketest"
)

var queuedBin, smokeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "smoke-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-o", dir+"/", "github.com/ttkit/ttkit/queued/cmd/queued", "github.com/ttkit/ttkit/queued/cmd/queued-exec", "github.com/ttkit/ttkit/queued/cmd/tt-device-smoke")
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

// host is a smoketest.Host with a stand-in for otelcol-tt's Prometheus
// endpoint that names each holder as the receiver does.
type host struct {
	*smoketest.Host
	metrics *httptest.Server
}

func newHost(t *testing.T, queuedEnv ...string) *host {
	t.Helper()
	h := &host{Host: smoketest.Start(t, queuedBin, queuedEnv...)}
	h.metrics = httptest.NewServer(http.HandlerFunc(h.ServeMetrics))
	t.Cleanup(h.metrics.Close)
	return h
}

func (h *host) options() smoke.Options {
	return smoke.Options{
		Card: 0, Queued: h.Client, QueuedAt: "the test's queued", MetricsURL: h.metrics.URL + "/metrics",
		DevDir: h.DevDir, Python: h.Python, KMDVersionFile: "/nonexistent/version",
		ResetTimeout: time.Minute, MetricsWait: 30 * time.Second,
	}
}

func TestSmokePassesOnFakeHost(t *testing.T) {
	h := newHost(t)
	var progress bytes.Buffer
	o := h.options()
	o.Progress = &progress
	r, err := smoke.Run(context.Background(), o)
	if err != nil {
		t.Fatalf("smoke.Run: %v\n%s", err, h.Log)
	}
	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	t.Logf("report:\n%s", out.String())
	if !r.Passed || !strings.HasSuffix(out.String(), "PASS\n") {
		t.Fatalf("smoke test failed on a healthy fake host:\n%s\nqueued:\n%s", out.String(), h.Log)
	}
	for _, want := range []string{"card 0 is healthy", "friendly_name=\"tt_smoke_holder.py\"", "opened " + h.Dev, "exit 0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if !strings.Contains(progress.String(), "resetting card 0") {
		t.Errorf("no progress lines: %q", progress.String())
	}
	// The card is left idle.
	st, err := h.Client.Status(context.Background())
	if err != nil || st.Cards[0].Current != nil || len(st.Cards[0].Pending) != 0 {
		t.Errorf("card not idle after the smoke test: %+v %v", st.Cards, err)
	}
}

func TestSmokeRefusesBusyCard(t *testing.T) {
	h := newHost(t)
	ctx := context.Background()

	// A process outside the queue holds the card.
	foreign := kmdtest.Start(t, t.TempDir(), nil, kmdtest.Python(t), "-c",
		"import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); print('ready', flush=True); sys.stdin.read()", h.Dev)
	smoketest.WaitFor(t, 10*time.Second, "queued to see the foreign holder", func() bool {
		st, err := h.Client.Status(ctx)
		return err == nil && len(st.Cards[0].Foreign) > 0
	})
	_, err := smoke.Run(ctx, h.options())
	if !errors.Is(err, smoke.ErrBusy) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", foreign.PID())) {
		t.Fatalf("with a foreign holder: err = %v, want ErrBusy naming pid %d", err, foreign.PID())
	}
	foreign.Stop()
	smoketest.WaitFor(t, 10*time.Second, "the foreign holder to go", func() bool {
		st, err := h.Client.Status(ctx)
		return err == nil && len(st.Cards[0].Foreign) == 0
	})

	// A job runs and another waits.
	dir := t.TempDir()
	gate := filepath.Join(dir, "go")
	run, err := h.Client.Queue(ctx, api.QueueRequest{Cmd: "while [ ! -e " + gate + " ]; do sleep 0.02; done", Cwd: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Client.Queue(ctx, api.QueueRequest{Cmd: "true", Cwd: dir}); err != nil {
		t.Fatal(err)
	}
	smoketest.WaitFor(t, 10*time.Second, "the job to run", func() bool {
		j, err := h.Client.Job(ctx, run.JobID)
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
	st, err := h.Client.Status(context.Background())
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
		cmd := exec.Command(smokeBin, "-dev-dir", h.DevDir, "-python", h.Python, "-metrics-wait", "30s")
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "TT_DEVICE_LOG_DIR=" + h.State, "SMOKE_METRICS_URL=" + h.metrics.URL + "/metrics"}, env...)
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
	foreign := kmdtest.Start(t, t.TempDir(), nil, h.Python, "-c",
		"import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); print('ready', flush=True); sys.stdin.read()", h.Dev)
	smoketest.WaitFor(t, 10*time.Second, "queued to see the foreign holder", func() bool {
		st, err := h.Client.Status(context.Background())
		return err == nil && len(st.Cards[0].Foreign) > 0
	})
	if code, _, errs := run(); code != 3 || !strings.Contains(errs, "card is busy") {
		t.Fatalf("busy card: exit %d\n%s", code, errs)
	} else {
		t.Logf("busy card: exit %d\n%s", code, errs)
	}
	foreign.Stop()
}
