//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/test/stress/queuedproc"
)

// TestDashboardAndRulesWithPrometheus runs the fleet view of one host for
// real: otelcol-tt reading a simulated driver tree, queued sending its
// metrics to otelcol-tt over OTLP, and a real Prometheus that scrapes
// otelcol-tt as docs/fleet.md says (job otelcol-tt, honor_labels) and
// loads deploy/prometheus/ttkit-rules.yaml. Jobs succeed and fail, a
// card is reset, a job runs with another waiting; then every query of
// deploy/grafana/ttkit.json, with $hostname set to this host, must
// return data, the hostname variable must list the host, and every rule
// must be loaded and healthy.
func TestDashboardAndRulesWithPrometheus(t *testing.T) {
	otelcol, err := filepath.Abs(*otelcolBin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(otelcol); err != nil {
		t.Fatalf("otelcol-tt binary: %v (run `make e2e`, which builds it)", err)
	}
	prometheus, err := exec.LookPath(*promBin)
	if err != nil {
		t.Fatalf("prometheus server: %v (install Debian's prometheus package)", err)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	queuedBin, err := queuedproc.Build(dir)
	if err != nil {
		t.Fatal(err)
	}

	// One process holds card 0 outside the queue.
	work := kmdtest.Workloads(t, dir)
	tree := kmdtest.NewTree(t, filepath.Join(dir, "driver"))
	tree.SetPids(0, work[0].PID())
	tree.SetPids(1)

	metrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	health := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	otlp := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	config, err := filepath.Abs("../../deploy/otelcol-tt/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The host name is left to the OS, as on a real host, so the
	// collector's hostname label and queued's instance agree.
	startServer(t, "otelcol-tt-fleet", dir, []string{
		"OTELCOL_TT_PROMETHEUS_ENDPOINT=" + metrics,
		"OTELCOL_TT_HEALTH_ENDPOINT=" + health,
		fmt.Sprintf("OTELCOL_TT_OTLP_GRPC_ENDPOINT=127.0.0.1:%d", freePort(t)),
		"OTELCOL_TT_OTLP_HTTP_ENDPOINT=" + otlp,
		"OTELCOL_TT_DRIVER_PATH=" + tree.Dir,
		"OTELCOL_TT_SYSFS_PATH=" + kmdtest.CopySysfs(t, "p150").Root,
	}, otelcol, "--config="+config,
		"--set=receivers::ttprocess::collection_interval="+collectionInterval.String(),
		"--set=receivers::ttprocess::initial_delay=0s",
		"--set=receivers::ttprocess::metrics::tt_device_process_count::enabled=true",
		"--set=service::telemetry::metrics::level=none")
	waitHTTP(t, "http://"+health+"/")

	d, err := queuedproc.Start(queuedproc.Options{Bin: queuedBin, StateDir: filepath.Join(dir, "state"), LogPath: filepath.Join(dir, "queued.log"),
		Env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + otlp, "OTEL_METRIC_EXPORT_INTERVAL=1000",
			"TT_DEVICE_RESET_CMD=true", "TT_DEVICE_HEALTH_CHECK_CMD=true", "TT_DEVICE_KILL_GRACE=1", "TT_DEVICE_TERM_GRACE=1", "TT_DEVICE_DRIVER_PATH=" + tree.Dir}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Stop(20 * time.Second); err != nil {
			t.Errorf("stopping queued: %v", err)
		}
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "queued.log"))
			t.Logf("--- queued log ---\n%s", b)
		}
	})

	rules, err := filepath.Abs("../../deploy/prometheus/ttkit-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	promPort := freePort(t)
	promConfig := filepath.Join(dir, "prometheus-fleet.yml")
	writeFile(t, promConfig, fmt.Sprintf(`
global:
  scrape_interval: %s
  evaluation_interval: %s
rule_files:
  - %s
scrape_configs:
  - job_name: otelcol-tt
    honor_labels: true
    static_configs:
      - targets: ['%s']
`, scrapeInterval, scrapeInterval, rules, metrics))
	startServer(t, "prometheus-fleet", dir, nil, prometheus,
		"--config.file="+promConfig,
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb-fleet"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", promPort))
	prom := fmt.Sprintf("http://127.0.0.1:%d", promPort)
	waitHTTP(t, prom+"/-/ready")

	// Activity for every panel: jobs that succeed and fail on both cards
	// over several scrapes, a reset, and a long job with one waiting.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := d.Client()
	defer c.Close()
	submit := func(card, cmd string) string {
		t.Helper()
		r, err := c.Queue(ctx, api.QueueRequest{Cmd: cmd, Cwd: dir, DeviceID: card})
		if err != nil {
			t.Fatal(err)
		}
		return r.JobID
	}
	if rs, err := c.Reset(ctx, api.ResetRequest{DeviceID: "1"}); err != nil || len(rs.Resets) != 1 {
		t.Fatalf("reset: %+v %v", rs, err)
	} else if _, err := c.WaitResult(ctx, rs.Resets[0].ResetJobID); err != nil {
		t.Fatal(err)
	}
	activity := func(cards ...string) {
		for _, card := range cards {
			for _, cmd := range []string{"sleep 0.2", "exit 3"} {
				id := submit(card, cmd)
				if _, err := c.WaitResult(ctx, id); err != nil {
					st, _ := c.Status(context.Background())
					b, _ := json.Marshal(st)
					t.Fatalf("job %s (%s on card %s): %v; status: %s", id, cmd, card, err, b)
				}
			}
		}
	}
	activity("0", "1")
	submit("0", "sleep 600") // card 0 stays busy from here on

	submit("0", "true")

	dash := readDashboard(t)
	hostRe := regexp.QuoteMeta(host)
	subst := strings.NewReplacer("$hostname", hostRe, "$__rate_interval", "1m")
	deadline := time.Now().Add(90 * time.Second)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			q := subst.Replace(tg.Expr)
			for {
				got := query(t, prom, q)
				if slices.ContainsFunc(got, func(s sample) bool { return s.Value != "NaN" }) {
					t.Logf("%s: %s -> %s", p.Title, q, render(got))
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("panel %q: %s returned no number within 90s: %s", p.Title, q, render(got))
				}
				// Rates need samples in two scrapes: keep jobs ending.
				activity("1")
			}
		}
	}

	// With the shipped config, tt_process carries the seed's four labels
	// and nothing else (the attribution labels are off by default).
	for _, s := range query(t, prom, fmt.Sprintf(`tt_process{hostname=%q}`, host)) {
		var names []string
		for k := range s.Metric {
			names = append(names, k)
		}
		slices.Sort(names)
		if want := []string{"__name__", "command_line", "friendly_name", "hostname", "instance", "job", "pid"}; !slices.Equal(names, want) {
			t.Errorf("tt_process labels %v, want %v", names, want)
		}
	}

	// The hostname variable lists this host.
	resp, err := http.Get(prom + "/api/v1/label/hostname/values?match[]=" + url.QueryEscape("tt_process_count"))
	if err != nil {
		t.Fatal(err)
	}
	var labels struct{ Data []string }
	err = json.NewDecoder(resp.Body).Decode(&labels)
	resp.Body.Close()
	if err != nil || !strings.Contains(strings.Join(labels.Data, "\n")+"\n", host+"\n") {
		t.Errorf("the hostname variable's values %v (%v) lack %q", labels.Data, err, host)
	}

	// Every rule loaded and evaluates without error.
	resp, err = http.Get(prom + "/api/v1/rules")
	if err != nil {
		t.Fatal(err)
	}
	var rs struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name, Health, LastError string
				}
			}
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&rs)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range rs.Data.Groups {
		for _, r := range g.Rules {
			n++
			if r.Health == "err" {
				t.Errorf("rule %s: %s", r.Name, r.LastError)
			}
		}
	}
	if n < 12 {
		t.Errorf("Prometheus loaded %d rules from ttkit-rules.yaml, want every one", n)
	}
}

// readDashboard reads the queries of deploy/grafana/ttkit.json.
func readDashboard(t *testing.T) (d struct {
	Panels []struct {
		Title   string
		Targets []struct{ Expr string }
	}
}) {
	t.Helper()
	b, err := os.ReadFile("../../deploy/grafana/ttkit.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	return d
}
