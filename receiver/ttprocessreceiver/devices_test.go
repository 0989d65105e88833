package ttprocessreceiver

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// devicePoints returns the tt_device_process_count points by device label.
func devicePoints(t *testing.T, md pmetric.Metrics) map[string]pmetric.NumberDataPoint {
	t.Helper()
	out := map[string]pmetric.NumberDataPoint{}
	for _, dp := range points(md, "tt_device_process_count") {
		out[attr(dp, "device")] = dp
	}
	return out
}

// The PID-0 holders of a device that cannot be read this cycle still count:
// its last known contribution is held like the series of its holders.
func TestScrape_UnreadableDeviceKeepsItsForeignHolders(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.host.process(4242, 9001, "python3", "python3", "train.py")
	b.host.pids(0, 4242)
	b.host.pids(1, 0, 0)
	b.start(t)
	require.EqualValues(t, 2, count(t, b.scrape(t)))

	b.host.breakPids(1)
	md, err := b.s.scrape(context.Background())
	require.Error(t, err)
	assert.EqualValues(t, 2, count(t, md), "the unread device's PID-0 holders are held")

	// The whole driver directory unlistable: the same.
	require.NoError(t, os.RemoveAll(b.host.driver.Dir))
	require.NoError(t, os.WriteFile(b.host.driver.Dir, nil, 0o644))
	md, err = b.s.scrape(context.Background())
	require.Error(t, err)
	assert.EqualValues(t, 2, count(t, md))
}

// tt_device_process_count: a device that cannot be read holds its last
// value; a device whose directory is gone ends its series at once.
func TestScrape_DeviceCountHeldOrEnded(t *testing.T) {
	t.Parallel()
	b := setup(t, func(cfg *Config) { cfg.Metrics.TtDeviceProcessCount.Enabled = true })
	b.host.process(4242, 9001, "python3", "python3", "train.py")
	b.host.process(4243, 9002, "python3", "python3", "eval.py")
	b.host.pids(0, 4242)
	b.host.pids(1, 4242, 4243)
	b.start(t)
	got := devicePoints(t, b.scrape(t))
	require.EqualValues(t, 2, got["1"].IntValue())

	b.host.breakPids(1)
	md, err := b.s.scrape(context.Background())
	require.Error(t, err)
	got = devicePoints(t, md)
	require.Contains(t, got, "1", "an unreadable device is held")
	assert.EqualValues(t, 2, got["1"].IntValue())
	assert.False(t, stale(got["1"]))

	require.NoError(t, os.RemoveAll(filepath.Join(b.host.driver.Dir, "1")))
	got = devicePoints(t, b.scrape(t))
	require.Contains(t, got, "1", "a vanished device gets an ending point")
	assert.True(t, stale(got["1"]), "flagged NoRecordedValue")
	assert.False(t, stale(got["0"]))
	for range removalRepeats {
		got = devicePoints(t, b.scrape(t))
	}
	assert.NotContains(t, got, "1", "and is then forgotten")
}

// Two ttprocess receivers reporting the same hostname would overwrite each
// other's tt_process_count in Prometheus: the second to start warns.
func TestScrape_TwoReceiversOneHostnameWarn(t *testing.T) {
	t.Parallel()
	first := setup(t, func(cfg *Config) { cfg.Hostname = "twin-host" })
	first.start(t)
	second := setup(t, func(cfg *Config) { cfg.Hostname = "twin-host" })
	second.start(t)
	warnings := second.logs.FilterMessageSnippet("same hostname").All()
	require.Len(t, warnings, 1)
	assert.Equal(t, "twin-host", warnings[0].ContextMap()["hostname"])
	assert.Empty(t, first.logs.FilterMessageSnippet("same hostname").All())

	// Once the first is shut down, a third with that name is alone.
	require.NoError(t, first.s.shutdown(context.Background()))
	require.NoError(t, second.s.shutdown(context.Background()))
	third := setup(t, func(cfg *Config) { cfg.Hostname = "twin-host" })
	third.start(t)
	assert.Empty(t, third.logs.FilterMessageSnippet("same hostname").All())
}

// The count-only mode (proc_path of another namespace) holds its count on
// an incomplete scan too: the unread device's holders still count.
func TestScrape_CountOnlyHoldsOnIncompleteScan(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.host.selfIs(777) // another namespace's procfs: count only
	b.host.pids(0, 4242)
	b.host.pids(1, 4243, 4244)
	b.start(t)
	require.EqualValues(t, 3, count(t, b.scrape(t)))
	b.host.breakPids(1)
	md, err := b.s.scrape(context.Background())
	require.Error(t, err)
	assert.EqualValues(t, 3, count(t, md))
}
