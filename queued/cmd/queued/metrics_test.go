package main

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/scheduler"
	"github.com/ttkit/ttkit/queued/telemetry/otlptest"
)

// outcomes are the job outcomes the known sequence produces on card 0.
var outcomes = []string{"success", "failure", "timeout", "killed", "interrupted"}

func (d *daemon) result(id string) api.Job {
	d.t.Helper()
	j, err := d.client.WaitResult(ctx(d.t), id)
	if err != nil {
		d.t.Fatal(err)
	}
	return j
}

func (d *daemon) resetCard(card string) api.ResetEntry {
	d.t.Helper()
	r, err := d.client.Reset(ctx(d.t), api.ResetRequest{DeviceID: card})
	if err != nil || len(r.Resets) != 1 || r.Resets[0].ResetJobID == "" {
		d.t.Fatalf("reset card %s: %+v, %v", card, r, err)
	}
	return r.Resets[0]
}

// TestQueued_MetricsReachAnOTLPReceiver runs the real daemon with
// OTEL_EXPORTER_OTLP_ENDPOINT pointing at a real OTLP/HTTP endpoint and
// drives it through jobs of every outcome, a reset that interrupts a job,
// a reset that kills card 1 and a held card with two jobs waiting; the
// exported metrics must say exactly that. A SIGTERM then interrupts the
// running job, and the last export (sent on the way out) counts it.
func TestQueued_MetricsReachAnOTLPReceiver(t *testing.T) {
	t.Parallel()
	r := otlptest.Start()
	defer r.Close()
	state, work := t.TempDir(), t.TempDir()
	d := startDaemonWith(t, state, bin, "OTEL_EXPORTER_OTLP_ENDPOINT="+r.URL, "OTEL_METRIC_EXPORT_INTERVAL=100",
		"TT_DEVICE_RESET_CMD=true", "TT_DEVICE_HEALTH_CHECK_CMD=test {device} = 0")

	want := map[string]string{"true": "success", "exit 3": "failure"}
	for cmd, outcome := range want {
		if j := d.result(d.queue("0", work, cmd)); j.Outcome != outcome {
			t.Fatalf("%s: %s", cmd, j.Outcome)
		}
	}
	to, err := d.client.Queue(ctx(t), api.QueueRequest{Cmd: "sleep 30", Cwd: work, DeviceID: "0", Timeout: 1})
	if err != nil {
		t.Fatal(err)
	}
	if j := d.result(to.JobID); j.Outcome != "timeout" {
		t.Fatalf("timeout job: %s", j.Outcome)
	}
	killed := d.queue("0", work, "echo started; sleep 1000")
	d.waitOutput(killed, "started")
	if _, err := d.client.Kill(ctx(t), killed); err != nil {
		t.Fatal(err)
	}
	if j := d.result(killed); j.Outcome != "killed" {
		t.Fatalf("killed job: %s", j.Outcome)
	}
	victim := d.queue("0", work, "echo started; sleep 1000")
	d.waitOutput(victim, "started")
	ok := d.resetCard("0")
	if j := d.result(victim); j.Outcome != "interrupted" {
		t.Fatalf("job interrupted by the reset: %s", j.Outcome)
	}
	if j := d.result(ok.ResetJobID); j.Outcome != "success" {
		t.Fatalf("reset of card 0: %+v", j)
	}
	if j := d.result(d.resetCard("1").ResetJobID); j.Outcome != "failure" {
		t.Fatalf("reset of card 1: %+v", j)
	}
	hold := d.queue("0", work, "echo started; sleep 1000")
	d.waitOutput(hold, "started")
	d.queue("0", work, "true")
	d.queue("0", work, "true")

	card0 := func(kv ...string) otlptest.Attrs {
		a := otlptest.Attrs{"card": "0"}
		for i := 0; i+1 < len(kv); i += 2 {
			a[kv[i]] = kv[i+1]
		}
		return a
	}
	wctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var why string
	snap, err := r.WaitFor(wctx, func(s otlptest.Snapshot) bool {
		check := func(ok bool, what string) bool {
			if !ok {
				why = what
			}
			return ok
		}
		for _, o := range outcomes {
			n, _, found := s.Histogram(scheduler.MetricRun, card0("outcome", o))
			w, _, _ := s.Histogram(scheduler.MetricWait, card0("outcome", o))
			if !check(found && n == 1 && w == 1, "run/wait histograms for "+o) {
				return false
			}
		}
		resetOK, _ := s.Sum(scheduler.MetricResets, card0("result", "ok"))
		resetFailed, _ := s.Sum(scheduler.MetricResets, otlptest.Attrs{"card": "1", "result": "failed"})
		dead, _ := s.Gauge(scheduler.MetricCardState, otlptest.Attrs{"card": "1", "state": "dead"})
		healthy, _ := s.Gauge(scheduler.MetricCardState, card0("state", "healthy"))
		resetting, _ := s.Gauge(scheduler.MetricCardState, card0("state", "recovering"))
		fit0, foundFit0 := s.Gauge(scheduler.MetricFit, card0())
		fit1, foundFit1 := s.Gauge(scheduler.MetricFit, otlptest.Attrs{"card": "1"})
		depth0, _ := s.Gauge(scheduler.MetricDepth, card0())
		depth1, found1 := s.Gauge(scheduler.MetricDepth, otlptest.Attrs{"card": "1"})
		age, _ := s.Gauge(scheduler.MetricRunningAge, card0())
		failing, foundFailing := s.Gauge(scheduler.MetricPersistFailing, otlptest.Attrs{})
		failures, foundFailures := s.Sum(scheduler.MetricPersistFailures, otlptest.Attrs{})
		resetFailed0, _ := s.Sum(scheduler.MetricResets, card0("result", "failed"))
		return check(resetOK == 1 && resetFailed == 1 && resetFailed0 == 0, "reset counts") &&
			check(dead == 1 && healthy == 1 && resetting == 0, "card states") &&
			check(foundFit0 && foundFit1 && fit0 == 1 && fit1 == 0, "card fitness (the dead card is not fit)") &&
			check(depth0 == 2 && found1 && depth1 == 0, "queue depths") &&
			check(age > 0, "running age") &&
			check(foundFailing && failing == 0 && foundFailures && failures == 0, "persistence")
	})
	if err != nil {
		t.Fatalf("%v; last unmet: %s", err, why)
	}
	for name, unit := range map[string]string{scheduler.MetricWait: "s", scheduler.MetricRun: "s", scheduler.MetricRunningAge: "s",
		scheduler.MetricDepth: "{job}", scheduler.MetricCardState: "{state}", scheduler.MetricResets: "{reset}"} {
		if got := snap.Unit(name); got != unit {
			t.Errorf("%s unit %q, want %q", name, got, unit)
		}
	}
	if got := snap.Resource("service.name"); got != "queued" {
		t.Errorf("service.name %q", got)
	}

	d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.exited
	last, _ := r.Latest()
	if n, _, _ := last.Histogram(scheduler.MetricRun, card0("outcome", "interrupted")); n != 2 {
		t.Fatalf("after SIGTERM the last export counts %d interrupted jobs, want 2", n)
	}
}

// TestQueued_MetricsFlushedAtExit sets an export interval far longer than
// the test: the only export is the one queued sends as it stops.
func TestQueued_MetricsFlushedAtExit(t *testing.T) {
	t.Parallel()
	r := otlptest.Start()
	defer r.Close()
	state, work := t.TempDir(), t.TempDir()
	d := startDaemonWith(t, state, bin, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT="+r.URL+"/v1/metrics",
		"OTEL_METRIC_EXPORT_INTERVAL=600000")
	d.result(d.queue("1", work, "true"))
	if n := r.Requests(); n != 0 {
		t.Fatalf("%d exports before the stop", n)
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.exited
	s, _ := r.Latest()
	if n, _, _ := s.Histogram(scheduler.MetricRun, otlptest.Attrs{"card": "1", "outcome": "success"}); r.Requests() != 1 || n != 1 {
		t.Fatalf("%d exports, success count %d; want the one sent at exit with 1", r.Requests(), n)
	}
	if !strings.Contains(d.stderr.String(), "exporting metrics over OTLP/HTTP") {
		t.Fatalf("no start message:\n%s", d.stderr.String())
	}
}

// TestQueued_NoMetricsWithoutEndpoint: with no OTEL_ variable the daemon
// says its metrics are off (and the telemetry package's tests prove no
// exporter or goroutine is started then).
func TestQueued_NoMetricsWithoutEndpoint(t *testing.T) {
	t.Parallel()
	state, work := t.TempDir(), t.TempDir()
	d := startDaemon(t, state)
	d.result(d.queue("0", work, "true"))
	if !strings.Contains(d.stderr.String(), "metrics are not exported") {
		t.Fatalf("stderr:\n%s", d.stderr.String())
	}
}

// TestQueued_RefusesUnsupportedOTLPProtocol: asking for OTLP over gRPC
// fails the start with a message naming the variable.
func TestQueued_RefusesUnsupportedOTLPProtocol(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0")
	cmd.Env = env("TT_DEVICE_IDS=0", "TT_DEVICE_LOG_DIR="+t.TempDir(),
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "OTEL_EXPORTER_OTLP_PROTOCOL") {
		t.Fatalf("%v: %s", err, out)
	}
}
