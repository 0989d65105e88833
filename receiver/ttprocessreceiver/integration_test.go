package ttprocessreceiver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/receiver/ttprocessreceiver/internal/metadata"
)

// TestIntegration_RealProcesses runs the receiver as the collector does
// (factory, scraper controller, consumer) over real processes listed in a
// fake driver tree, and watches one of them go away.
func TestIntegration_RealProcesses(t *testing.T) {
	dir := t.TempDir()
	work := kmdtest.Workloads(t, dir)
	train, pytest, sleeper := work[0], work[1], work[2]
	tree := kmdtest.NewTree(t, filepath.Join(dir, "driver"))
	tree.SetPids(0, train.PID(), train.PID(), pytest.PID())
	tree.SetPids(1, pytest.PID(), sleeper.PID())

	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.CollectionInterval = 50 * time.Millisecond
	cfg.InitialDelay = 0
	cfg.DriverPath = tree.Dir
	cfg.Hostname = "itest"
	sink := new(consumertest.MetricsSink)
	rcvr, err := f.CreateMetrics(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, rcvr.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, rcvr.Shutdown(context.Background())) })

	// Every holder, named: on a busy machine a first scrape may still
	// carry a slow cmdline read's PID fallback (the spec's), which the
	// next scrape replaces.
	got := waitFor(t, sink, func(pts map[string]pmetric.NumberDataPoint) bool {
		if len(pts) != 3 {
			return false
		}
		for pid, dp := range pts {
			if attr(dp, "friendly_name") == pid || stale(dp) {
				return false
			}
		}
		return true
	})
	for _, p := range work {
		dp, ok := got[strconv.Itoa(p.PID())]
		require.True(t, ok, "no series for %s", p.CommandLine)
		assert.Equal(t, p.FriendlyName, attr(dp, "friendly_name"))
		assert.Equal(t, p.CommandLine, attr(dp, "command_line"))
		assert.Equal(t, "itest", attr(dp, "hostname"))
		assert.EqualValues(t, 1, dp.IntValue())
	}

	// The sleeper exits and the driver drops its descriptors.
	sleeper.Stop()
	tree.SetPids(1, pytest.PID())
	gone := strconv.Itoa(sleeper.PID())
	got = waitFor(t, sink, func(pts map[string]pmetric.NumberDataPoint) bool {
		dp, ok := pts[gone]
		return ok && stale(dp)
	})
	assert.Equal(t, "sleep", attr(got[gone], "friendly_name"), "the staleness point carries the series' labels")
	waitFor(t, sink, func(pts map[string]pmetric.NumberDataPoint) bool {
		_, ok := pts[gone]
		return !ok && len(pts) == 2
	})
}

// waitFor polls the sink's newest batch until ok accepts its tt_process
// points, keyed by pid.
func waitFor(t *testing.T, sink *consumertest.MetricsSink, ok func(map[string]pmetric.NumberDataPoint) bool) map[string]pmetric.NumberDataPoint {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	seen := 0
	for time.Now().Before(deadline) {
		all := sink.AllMetrics()
		for ; seen < len(all); seen++ {
			if pts := processPoints(t, all[seen]); ok(pts) {
				return pts
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no scrape matched within 15s (%d scrapes seen)", seen)
	return nil
}

// TestIntegration_RemovalSurvivesARefusedBatch: the pipeline refuses the
// batch carrying a removal (memory_limiter, an exporter error). The
// staleness point is sent again in the next cycles, so the series still
// ends, and it is sent for a few cycles only.
func TestIntegration_RemovalSurvivesARefusedBatch(t *testing.T) {
	host := newFakeHost(t)
	host.selfIs(os.Getpid()) // the factory's scraper is this process
	host.process(4242, 9001, "python3", "python3", "train.py")
	host.process(4243, 9002, "sleep", "sleep", "600")
	host.pids(0, 4242, 4243)

	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.CollectionInterval = 20 * time.Millisecond
	cfg.Timeout = 0
	cfg.InitialDelay = 0
	cfg.DriverPath = host.driver.Dir
	cfg.ProcPath = host.proc
	cfg.Hostname = "refused"
	sink := new(consumertest.MetricsSink)
	var mu sync.Mutex
	refused := 0
	next, err := consumer.NewMetrics(func(ctx context.Context, md pmetric.Metrics) error {
		mu.Lock()
		defer mu.Unlock()
		for _, dp := range points(md, "tt_process") {
			if stale(dp) && refused == 0 {
				refused++
				return errors.New("data refused due to high memory usage")
			}
		}
		return sink.ConsumeMetrics(ctx, md)
	})
	require.NoError(t, err)
	rcvr, err := f.CreateMetrics(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, next)
	require.NoError(t, err)
	require.NoError(t, rcvr.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, rcvr.Shutdown(context.Background())) })

	waitFor(t, sink, func(pts map[string]pmetric.NumberDataPoint) bool { return len(pts) == 2 })
	host.pids(0, 4242)
	got := waitFor(t, sink, func(pts map[string]pmetric.NumberDataPoint) bool {
		dp, ok := pts["4243"]
		return ok && stale(dp)
	})
	assert.Equal(t, "sleep", attr(got["4243"], "friendly_name"))
	mu.Lock()
	assert.Equal(t, 1, refused, "the first batch with the removal was refused")
	mu.Unlock()
	// Repeated for a few cycles, then no more.
	waitFor(t, sink, func(pts map[string]pmetric.NumberDataPoint) bool {
		_, ok := pts["4243"]
		return !ok && len(pts) == 1
	})
}

// TestIntegration_CardTelemetry runs the receiver as the collector does
// with card telemetry on: the card-health scraper's points arrive in the
// same batch as tt_process_count, and without the switch there is no
// card series at all.
func TestIntegration_CardTelemetry(t *testing.T) {
	for _, enabled := range []bool{true, false} {
		host := newFakeHost(t)
		host.selfIs(os.Getpid())
		host.process(4242, 9001, "python3", "python3", "train.py")
		host.pids(0, 4242)
		f := NewFactory()
		cfg := f.CreateDefaultConfig().(*Config)
		cfg.CollectionInterval = 20 * time.Millisecond
		cfg.CardTelemetry = CardTelemetryConfig{Enabled: enabled, HeartbeatStallWindow: time.Second}
		cfg.DriverPath, cfg.ProcPath = host.driver.Dir, host.proc
		cfg.SysfsPath = kmdtest.CopySysfs(t, "p150").Root
		cfg.Hostname = "cards"
		sink := new(consumertest.MetricsSink)
		rcvr, err := f.CreateMetrics(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, sink)
		require.NoError(t, err)
		require.NoError(t, rcvr.Start(context.Background(), componenttest.NewNopHost()))
		deadline := time.Now().Add(15 * time.Second)
		for len(sink.AllMetrics()) < 3 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		require.NoError(t, rcvr.Shutdown(context.Background()))
		batches := sink.AllMetrics()
		require.NotEmpty(t, batches)
		md := batches[len(batches)-1]
		assert.Len(t, points(md, "tt_process_count"), 1)
		if enabled {
			temps := points(md, "tt_device.temperature")
			require.Len(t, temps, 1, "card telemetry in the same batch")
			assert.InDelta(t, 61.25, temps[0].DoubleValue(), 1e-9)
		} else {
			assert.Empty(t, points(md, "tt_device.temperature"))
		}
	}
}
