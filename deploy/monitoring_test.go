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

	"go.yaml.in/yaml/v3"

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

// TestAlertRules checks ttkit-rules.yaml and runs its unit tests, and
// that every alert has tests, one of which expects it not to fire.
func TestAlertRules(t *testing.T) {
	p := promtool(t)
	run(t, "prometheus", p, "check", "rules", "ttkit-rules.yaml")
	run(t, "prometheus", p, "test", "rules", "ttkit-rules.test.yaml")

	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, "prometheus/ttkit-rules.yaml", &rules)
	readYAML(t, "prometheus/ttkit-rules.test.yaml", &tests)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	known := exportedMetrics()
	metricRe := regexp.MustCompile(`\b(tt_[a-z_]+|up)\b`)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("alert %s: tests where it fires %v, where it must not %v; want both", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
			for _, m := range metricRe.FindAllString(r.Expr, -1) {
				if !slices.Contains(known, m) && !strings.HasPrefix(m, "ttkit") {
					t.Errorf("alert %s: %s is not a metric otelcol-tt or queued exports", r.Alert, m)
				}
			}
		}
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
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

// cardMetrics are the Prometheus names of the receiver's card telemetry,
// as the e2e suite reads them from a real Prometheus (docs/card-health.md).
var cardMetrics = []string{
	"tt_device_temperature_celsius", "tt_device_temperature_max_celsius",
	"tt_device_power_watts", "tt_device_power_max_watts",
	"tt_device_voltage_volts", "tt_device_voltage_max_volts",
	"tt_device_current_amperes", "tt_device_current_max_amperes",
	"tt_device_fan_speed_per_min", "tt_device_fan_speed_max_per_min",
	"tt_device_clock_hertz", "tt_device_heartbeat_stalled", "tt_device_thermal_trips_total", "tt_device_info",
}

// exportedMetrics are the Prometheus names otelcol-tt serves: the
// receiver's metrics and queued's, translated as its Prometheus exporter
// does (dots to underscores, _seconds for unit s, _total for counters,
// _bucket/_sum/_count for histograms).
func exportedMetrics() []string {
	p := func(s string) string { return strings.ReplaceAll(s, ".", "_") }
	out := append([]string{"tt_process", "tt_process_count", "tt_device_process_count", "up",
		p(scheduler.MetricDepth), p(scheduler.MetricCardState), p(scheduler.MetricRunningAge) + "_seconds",
		p(scheduler.MetricResets) + "_total", p(scheduler.MetricPersistFailures) + "_total", p(scheduler.MetricPersistFailing),
		p(scheduler.MetricHeld), p(scheduler.MetricForeign), p(scheduler.MetricCardInfo), p(scheduler.MetricCrossCard) + "_total",
		p(scheduler.MetricFit)},
		cardMetrics...)
	for _, h := range []string{scheduler.MetricWait, scheduler.MetricRun, scheduler.MetricGate} {
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
		if p.Type == "row" {
			continue // a row heads panels and queries nothing
		}
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
	for _, want := range []string{"holds each card", "holders over time", "per device", "queue depth", "p90 wait", "run time by outcome", "resets", "dead cards", "store failing",
		"card fitness", "unfit, recovering or dead", "gate time", "card health", "card temperature", "card power", "fan speed", "ai clock", "heartbeat", "thermal trips", "firmware"} {
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
