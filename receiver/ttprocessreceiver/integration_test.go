package ttprocessreceiver

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
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

	got := waitFor(t, sink, func(pts map[string]pmetric.NumberDataPoint) bool { return len(pts) == 3 })
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
