// Tests of the monitoring files in deploy/: the Prometheus alert rules
// pass their promtool unit tests, and the Grafana dashboard has the
// panels and the hostname variable a fleet needs, every query of it
// parses, and it names only metrics that otelcol-tt and queued export.
// `make e2e` (test/e2e) checks that every query returns data.
package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/scheduler"
)

// promtool finds Debian's promtool; CI (CI=true) installs the
// prometheus package, so it fails there rather than skipping.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("promtool: %v (install Debian's prometheus package)", err)
		}
		t.Skip("skipping: no promtool on PATH (install Debian's prometheus package)")
	}
	return p
}

func run(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	t.Logf("%s %s:\n%s", filepath.Base(name), strings.Join(args, " "), out)
}

// TestAlertRules checks ttkit-rules.yaml and runs its unit tests.
func TestAlertRules(t *testing.T) {
	p := promtool(t)
	run(t, "prometheus", p, "check", "rules", "ttkit-rules.yaml")
	run(t, "prometheus", p, "test", "rules", "ttkit-rules.test.yaml")
}

// Dashboard is the part of a Grafana dashboard the tests read.
type Dashboard struct {
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name     string `json:"name"`
			Type     string `json:"type"`
			AllValue string `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// LoadDashboard reads deploy/grafana/ttkit.json.
func loadDashboard(t *testing.T) Dashboard {
	t.Helper()
	b, err := os.ReadFile("grafana/ttkit.json")
	if err != nil {
		t.Fatal(err)
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana/ttkit.json: %v", err)
	}
	return d
}

// exportedMetrics are the Prometheus names otelcol-tt serves: the
// receiver's metrics and queued's, translated as its Prometheus exporter
// does (dots to underscores, _seconds for unit s, _total for counters,
// _bucket/_sum/_count for histograms).
func exportedMetrics() []string {
	p := func(s string) string { return strings.ReplaceAll(s, ".", "_") }
	out := []string{"tt_process", "tt_process_count", "tt_device_process_count", "up",
		p(scheduler.MetricDepth), p(scheduler.MetricCardState), p(scheduler.MetricRunningAge) + "_seconds",
		p(scheduler.MetricResets) + "_total", p(scheduler.MetricPersistFailures) + "_total", p(scheduler.MetricPersistFailing)}
	for _, h := range []string{scheduler.MetricWait, scheduler.MetricRun} {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			out = append(out, p(h)+"_seconds"+suffix)
		}
	}
	return out
}

// Substitute replaces the dashboard's variables with values Prometheus
// takes: every host, and a rate interval.
func substitute(expr string) string {
	return strings.NewReplacer("$hostname", ".*", "$__rate_interval", "1m", "${datasource}", "").Replace(expr)
}

// TestDashboard checks the dashboard's shape, that each query filters by
// the hostname variable, names exported metrics only, and parses.
func TestDashboard(t *testing.T) {
	d := loadDashboard(t)
	if len(d.Panels) < 6 {
		t.Errorf("%d panels, want at least 6", len(d.Panels))
	}
	hasHost := false
	for _, v := range d.Templating.List {
		if v.Name == "hostname" && v.Type == "query" && v.AllValue == ".*" {
			hasHost = true
		}
	}
	if !hasHost {
		t.Error("no query variable hostname with allValue .*")
	}
	known := exportedMetrics()
	metricRe := regexp.MustCompile(`\b(tt_[a-z_]+|up)\b`)
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if !strings.Contains(tg.Expr, `=~"$hostname"`) {
				t.Errorf("panel %q: %s does not filter by $hostname", p.Title, tg.Expr)
			}
			for _, m := range metricRe.FindAllString(tg.Expr, -1) {
				if !slices.Contains(known, m) {
					t.Errorf("panel %q: %s is not a metric otelcol-tt or queued exports", p.Title, m)
				}
			}
			q, _ := json.Marshal(substitute(tg.Expr))
			fmt.Fprintf(&rules, "      - record: dashboard:query%d\n        expr: %s\n", n, q)
			n++
		}
	}
	titles := strings.ToLower(fmt.Sprint(d.Panels))
	for _, want := range []string{"holds each card", "holders over time", "per device", "queue depth", "p90 wait", "run time by outcome", "resets", "dead cards", "store failing"} {
		if !strings.Contains(titles, want) {
			t.Errorf("no panel about %q", want)
		}
	}
	p := promtool(t)
	f := filepath.Join(t.TempDir(), "dashboard-queries.yaml")
	if err := os.WriteFile(f, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, ".", p, "check", "rules", f)
}
