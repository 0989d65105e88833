package ttprocessreceiver

import (
	"context"
	"errors"
	"flag"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/collector/scraper/scrapererror"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ttkit/ttkit/receiver/ttprocessreceiver/internal/metadata"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata/ from the current output")

// ownPID stands in for the collector's PID in the fake trees.
const ownPID = 31337

type testBundle struct {
	host *fakeHost
	s    *ttScraper
	logs *observer.ObservedLogs
	tick time.Time
}

func setup(t *testing.T, mutate func(*Config)) *testBundle {
	t.Helper()
	host := newFakeHost(t)
	cfg := createDefaultConfig()
	cfg.DriverPath = host.driver.Dir
	cfg.ProcPath = host.proc
	cfg.cgroupPath = host.cgroup
	// One hostname per test: receivers of one process that share a
	// hostname warn (see TestScrape_TwoReceiversOneHostnameWarn), and the
	// tests run in parallel in one process.
	cfg.Hostname = "h-" + strings.ReplaceAll(t.Name(), "/", "-")
	if mutate != nil {
		mutate(cfg)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	b := &testBundle{host: host, logs: logs, tick: time.Unix(1_750_000_000, 0)}
	b.s = newScraper(cfg, set)
	b.s.selfPID = ownPID
	b.s.now = func() time.Time { b.tick = b.tick.Add(10 * time.Second); return b.tick }
	t.Cleanup(func() { require.NoError(t, b.s.shutdown(context.Background())) })
	return b
}

func (b *testBundle) start(t *testing.T) {
	t.Helper()
	require.NoError(t, b.s.start(context.Background(), componenttest.NewNopHost()))
}

func (b *testBundle) scrape(t *testing.T) pmetric.Metrics {
	t.Helper()
	md, err := b.s.scrape(context.Background())
	require.NoError(t, err)
	return md
}

// processPoints returns the tt_process points keyed by their pid label.
func processPoints(t *testing.T, md pmetric.Metrics) map[string]pmetric.NumberDataPoint {
	t.Helper()
	out := map[string]pmetric.NumberDataPoint{}
	for _, dp := range points(md, "tt_process") {
		pid, ok := dp.Attributes().Get("pid")
		require.True(t, ok, "tt_process point without pid")
		_, dup := out[pid.Str()]
		require.False(t, dup, "two tt_process points for pid %s", pid.Str())
		out[pid.Str()] = dp
	}
	return out
}

func points(md pmetric.Metrics, name string) []pmetric.NumberDataPoint {
	var out []pmetric.NumberDataPoint
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				if ms.At(k).Name() != name {
					continue
				}
				dps := ms.At(k).Gauge().DataPoints()
				for l := 0; l < dps.Len(); l++ {
					out = append(out, dps.At(l))
				}
			}
		}
	}
	return out
}

func count(t *testing.T, md pmetric.Metrics) int64 {
	t.Helper()
	dps := points(md, "tt_process_count")
	require.Len(t, dps, 1)
	return dps[0].IntValue()
}

func attr(dp pmetric.NumberDataPoint, key string) string {
	v, _ := dp.Attributes().Get(key)
	return v.AsString()
}

func stale(dp pmetric.NumberDataPoint) bool { return dp.Flags().NoRecordedValue() }

// replaced splits a scrape in which one series was replaced by another
// into the ended series' staleness point and the new series' point.
func replaced(t *testing.T, md pmetric.Metrics) (old, fresh pmetric.NumberDataPoint) {
	t.Helper()
	dps := points(md, "tt_process")
	require.Len(t, dps, 2)
	for _, dp := range dps {
		if stale(dp) {
			old = dp
		} else {
			fresh = dp
		}
	}
	return old, fresh
}

func compareGolden(t *testing.T, name string, actual pmetric.Metrics) {
	t.Helper()
	path := filepath.Join("testdata", "expected", name+".yaml")
	if *updateGolden {
		require.NoError(t, golden.WriteMetrics(t, path, actual))
	}
	expected, err := golden.ReadMetrics(path)
	require.NoError(t, err)
	require.NoError(t, pmetrictest.CompareMetrics(expected, actual,
		pmetrictest.IgnoreTimestamp(), pmetrictest.IgnoreStartTimestamp(), pmetrictest.IgnoreMetricDataPointsOrder(),
		pmetrictest.IgnoreResourceMetricsOrder()))
}

// A busy host: holders on several devices, fd duplicates, a holder outside
// our namespace, a kernel thread, and the collector itself.
func populate(h *fakeHost) {
	h.process(4242, 9001, "python3", "python3", "train.py", "--epochs", "3")
	h.process(4243, 9002, "python3", "/opt/venv/bin/python3", "-m", "pytest", "-k", "fast", "tests/test_matmul.py::TestMatmul::test_fast[bf16]")
	h.process(4244, 9003, "kworker/0:1")
	h.process(ownPID, 100, "otelcol-tt", "otelcol-tt", "--config=/etc/otelcol-tt/config.yaml")
	h.pids(0, 4242, 4242, 4243, 0, ownPID)
	h.pids(1, 4243, 4244, 0, 0, ownPID)
	h.pids(2)
}

func TestScrape_Golden(t *testing.T) {
	t.Parallel()
	b := setup(t, func(cfg *Config) {
		cfg.Metrics.TtDeviceProcessCount.Enabled = true
		cfg.Hostname = "bh-glx-c09u02"
	})
	populate(b.host)
	b.start(t)
	md := b.scrape(t)
	compareGolden(t, "busy_host", md)

	got := processPoints(t, md)
	assert.Equal(t, "train.py", attr(got["4242"], "friendly_name"))
	assert.Equal(t, "python3 train.py --epochs 3", attr(got["4242"], "command_line"))
	assert.Equal(t, "test_matmul.py", attr(got["4243"], "friendly_name"))
	assert.Equal(t, "kworker/0:1", attr(got["4244"], "friendly_name"), "a comm value is reported as-is")
	assert.NotContains(t, got, strconv.Itoa(ownPID), "the collector's own PID is excluded")
	assert.NotContains(t, got, "0", "PID 0 is never named")
	assert.EqualValues(t, 4, count(t, md), "three named processes plus the collapsed PID-0 holders")
}

func TestScrape_DeviceProcessCountIsOptIn(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	populate(b.host)
	b.start(t)
	md := b.scrape(t)
	assert.Empty(t, points(md, "tt_device_process_count"))
	assert.Len(t, points(md, "tt_process"), 3)
}

func TestScrape_LabelsCapturedOnceAndRepublished(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.host.process(4242, 9001, "python3", "python3", "train.py")
	b.host.pids(0, 4242)
	b.start(t)
	first := processPoints(t, b.scrape(t))["4242"]

	// The same process (same start time) rewrites its argv: the labels
	// stay what they were when the series was created.
	b.host.process(4242, 9001, "python3", "python3", "evil.py")
	second := processPoints(t, b.scrape(t))["4242"]
	assert.Equal(t, "train.py", attr(second, "friendly_name"))
	assert.Equal(t, "python3 train.py", attr(second, "command_line"))
	assert.EqualValues(t, 1, second.IntValue())
	assert.Greater(t, second.Timestamp(), first.Timestamp(), "every cycle re-publishes with a fresh timestamp")
}

// TestScrape_SeriesNamedMidExecIsRenamed: a scan that races a holder's
// execve finds no command line and names it from comm; when the command
// line appears (same start time), that series ends and one under the real
// name starts. A series named from its command line never changes (see
// TestScrape_LabelsCapturedOnceAndRepublished).
func TestScrape_SeriesNamedMidExecIsRenamed(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.host.process(4242, 9001, "python3") // no arguments yet
	b.host.pids(0, 4242)
	b.start(t)
	first := processPoints(t, b.scrape(t))["4242"]
	require.Equal(t, "python3", attr(first, "command_line"))

	b.host.process(4242, 9001, "python3", "python3", "train.py")
	old, fresh := replaced(t, b.scrape(t))
	assert.Equal(t, "python3", attr(old, "command_line"), "the comm-named series ends")
	assert.Equal(t, "train.py", attr(fresh, "friendly_name"))
	assert.Equal(t, "python3 train.py", attr(fresh, "command_line"))

	live := livePoints(b.scrape(t))
	require.Len(t, live, 1)
	assert.Equal(t, "python3 train.py", attr(live[0], "command_line"))
}

// livePoints returns the tt_process points not flagged NoRecordedValue.
func livePoints(md pmetric.Metrics) []pmetric.NumberDataPoint {
	var out []pmetric.NumberDataPoint
	for _, dp := range points(md, "tt_process") {
		if !stale(dp) {
			out = append(out, dp)
		}
	}
	return out
}

// TestScrape_GoneProcessEmitsStalenessPoints: a removal is sent in
// removalRepeats cycles in a row (the pipeline may refuse one batch; see
// TestIntegration_RemovalSurvivesARefusedBatch), then never again.
func TestScrape_GoneProcessEmitsStalenessPoints(t *testing.T) {
	t.Parallel()
	b := setup(t, func(cfg *Config) { cfg.Hostname = "bh-glx-c09u02" }) // as in the golden file
	b.host.process(4242, 9001, "python3", "python3", "train.py")
	b.host.process(4243, 9002, "sleep", "sleep", "600")
	b.host.pids(0, 4242, 4243)
	b.start(t)
	require.Len(t, processPoints(t, b.scrape(t)), 2)

	b.host.pids(0, 4242)
	md := b.scrape(t)
	got := processPoints(t, md)
	require.Len(t, got, 2)
	assert.False(t, stale(got["4242"]))
	assert.True(t, stale(got["4243"]), "the gone process's last point is flagged NoRecordedValue")
	assert.Equal(t, "sleep", attr(got["4243"], "friendly_name"), "the staleness point names the series it ends")
	assert.EqualValues(t, 1, count(t, md))
	compareGolden(t, "process_gone", md)

	for range removalRepeats - 1 {
		got = processPoints(t, b.scrape(t))
		require.Len(t, got, 2)
		assert.True(t, stale(got["4243"]), "the removal is repeated")
	}
	got = processPoints(t, b.scrape(t))
	assert.Len(t, got, 1)
	assert.Contains(t, got, "4242")
}

func TestScrape_PIDReuseStartsANewSeries(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.host.process(4242, 9001, "python3", "python3", "train.py")
	b.host.pids(0, 4242)
	b.start(t)
	b.scrape(t)

	// Another process now has PID 4242: a different start time.
	b.host.process(4242, 12345, "python3", "python3", "eval.py")
	old, fresh := replaced(t, b.scrape(t))
	assert.Equal(t, "train.py", attr(old, "friendly_name"))
	assert.Equal(t, "eval.py", attr(fresh, "friendly_name"))
	assert.Equal(t, "python3 eval.py", attr(fresh, "command_line"))
}

func TestScrape_PIDReuseWithSameLabelsContinuesTheSeries(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.host.process(4242, 9001, "sleep", "sleep", "600")
	b.host.pids(0, 4242)
	b.start(t)
	b.scrape(t)

	b.host.process(4242, 12345, "sleep", "sleep", "600")
	dps := points(b.scrape(t), "tt_process")
	require.Len(t, dps, 1, "a staleness point would end the series the new process continues")
	assert.False(t, stale(dps[0]))
	assert.EqualValues(t, 1, dps[0].IntValue())
}

func TestScrape_PIDZeroAndPrivateNamespace(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.host.pids(0, 0, 0, 1)
	b.host.pids(1, 0)
	b.s.selfPID = 1 // inside a private PID namespace the collector is PID 1
	b.start(t)
	md := b.scrape(t)
	assert.Empty(t, points(md, "tt_process"), "no holder can be named")
	assert.EqualValues(t, 1, count(t, md), "every PID-0 holder collapses into one: a floor")

	warnings := b.logs.FilterLevelExact(zapcore.WarnLevel).All()
	require.Len(t, warnings, 2, "one warning for own PID 1, one for a scan of only PID-0 holders")
	for _, w := range warnings {
		assert.Contains(t, w.Message, "hostPID: true")
		assert.Contains(t, w.Message, "--pid=host")
	}
	b.scrape(t)
	assert.Len(t, b.logs.FilterLevelExact(zapcore.WarnLevel).All(), 2, "the PID-0 warning is given once")
}

func TestScrape_OnlyForeignHoldersWarnsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.host.pids(0, 0)
	b.start(t)
	info := b.logs.FilterMessageSnippet("own PID").All()
	require.Len(t, info, 1, "the excluded own PID is logged at start")
	assert.EqualValues(t, ownPID, info[0].ContextMap()["pid"])
	assert.Empty(t, b.logs.FilterLevelExact(zapcore.WarnLevel).All())

	b.scrape(t)
	b.scrape(t)
	warnings := b.logs.FilterLevelExact(zapcore.WarnLevel).All()
	require.Len(t, warnings, 1)
	assert.Contains(t, warnings[0].Message, "PID 0")
	assert.Contains(t, warnings[0].Message, "hostPID: true")
}

func TestScrape_IncompleteScanRetiresNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.host.process(4242, 9001, "python3", "python3", "train.py")
	b.host.process(4243, 9002, "python3", "python3", "eval.py")
	b.host.process(4244, 9003, "tt-smi", "tt-smi", "-s")
	b.host.pids(0, 4242)
	b.host.pids(1, 4243)
	b.start(t)
	require.Len(t, processPoints(t, b.scrape(t)), 2)

	// Device 1 cannot be read and 4242 is gone from device 0, but a new
	// holder appears there: the new one is added, nothing is retired.
	b.host.breakPids(1)
	b.host.pids(0, 4244)
	md, err := b.s.scrape(context.Background())
	require.Error(t, err)
	assert.True(t, scrapererror.IsPartialScrapeError(err))
	var partial scrapererror.PartialScrapeError
	require.True(t, errors.As(err, &partial))
	assert.Equal(t, 1, partial.Failed, "one device failed")
	assert.Contains(t, err.Error(), "device 1", "the error names the device")

	got := processPoints(t, md)
	require.Len(t, got, 3)
	for pid, dp := range got {
		assert.False(t, stale(dp), "pid %s must keep its series on incomplete evidence", pid)
	}
	assert.EqualValues(t, 3, count(t, md))

	// The device reads again: now the gone processes are retired.
	b.host.pids(1)
	got = processPoints(t, b.scrape(t))
	assert.True(t, stale(got["4242"]))
	assert.True(t, stale(got["4243"]))
	assert.False(t, stale(got["4244"]))
}

// A missing or empty driver directory is a host with no holders, but it is
// more often a deployment mistake than an idle host: it is said once, with
// the path and the usual causes.
func TestScrape_MissingDriverIsAnEmptyHost(t *testing.T) {
	t.Parallel()
	for name, mutate := range map[string]func(*Config){
		"missing": func(cfg *Config) { cfg.DriverPath = filepath.Join(cfg.DriverPath, "not-loaded") },
		"empty":   nil,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, mutate)
			b.start(t)
			md := b.scrape(t)
			assert.Empty(t, points(md, "tt_process"))
			assert.EqualValues(t, 0, count(t, md))
			b.scrape(t)
			warnings := b.logs.FilterLevelExact(zapcore.WarnLevel).All()
			require.Len(t, warnings, 1, "warned once")
			assert.Contains(t, warnings[0].Message, name)
			assert.Equal(t, b.s.cfg.DriverPath, warnings[0].ContextMap()["driver_path"])
			for _, cause := range []string{"driver_path", "masked", "KMD"} {
				assert.Contains(t, warnings[0].Message, cause)
			}
		})
	}
}

func TestScrape_DegradedIdentities(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	// 4242 has no /proc entry at all (hidepid, or it exited mid-scan).
	// 4243's command line is nothing but bytes outside printable ASCII.
	b.host.process(4243, 9002, "x", "\x01\x02", "\xff")
	b.host.pids(0, 4242, 4243)
	b.start(t)
	got := processPoints(t, b.scrape(t))
	assert.Equal(t, "4242", attr(got["4242"], "friendly_name"))
	assert.Equal(t, "4242", attr(got["4242"], "command_line"))
	assert.Equal(t, "<unknown>", attr(got["4243"], "friendly_name"))
	assert.Equal(t, "<unknown>", attr(got["4243"], "command_line"))
}

func TestScrape_CommandLineRedact(t *testing.T) {
	t.Parallel()
	b := setup(t, func(cfg *Config) {
		cfg.CommandLineRedact = []string{`--token[= ]\S+`, `://[^@ ]+@`}
	})
	b.host.process(4242, 9001, "python3", "python3", "serve.py", "--token", "hunter2", "--db", "postgres://bob:pw@db/x")
	b.host.process(4243, 9002, "python3", "python3", "--token=abc", "fetch.py")
	b.host.pids(0, 4242, 4243)
	b.start(t)
	got := processPoints(t, b.scrape(t))
	assert.Equal(t, "python3 serve.py *** --db postgres***db/x", attr(got["4242"], "command_line"))
	assert.Equal(t, "serve.py", attr(got["4242"], "friendly_name"))
	// The friendly name is derived after redaction, so it stays a
	// substring of the label, and it is not the redacted token.
	assert.Equal(t, "python3 *** fetch.py", attr(got["4243"], "command_line"))
	assert.Equal(t, "fetch.py", attr(got["4243"], "friendly_name"))
}

func TestScrape_ResourceHostName(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t)
	md := b.scrape(t)
	require.Equal(t, 1, md.ResourceMetrics().Len())
	v, ok := md.ResourceMetrics().At(0).Resource().Attributes().Get("host.name")
	require.True(t, ok)
	assert.Equal(t, b.s.cfg.Hostname, v.Str())
}
