package ttprocessreceiver

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/collector/scraper/scrapererror"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/internal/ttsysfs"
	"github.com/ttkit/ttkit/receiver/ttprocessreceiver/internal/metadata"
)

type cardBundle struct {
	fs   *kmdtest.Sysfs
	s    *cardScraper
	tick time.Time
}

// allCardMetrics turns on the card metrics that are off by default.
func allCardMetrics(cfg *Config) {
	m := &cfg.Metrics
	for _, enabled := range []*bool{&m.TtDeviceFanSpeed.Enabled, &m.TtDeviceFanSpeedMax.Enabled, &m.TtDeviceThermalTrips.Enabled,
		&m.TtDeviceTemperatureMax.Enabled, &m.TtDevicePowerMax.Enabled, &m.TtDeviceVoltageMax.Enabled, &m.TtDeviceCurrentMax.Enabled} {
		*enabled = true
	}
}

// cardSetup runs a card scraper over fs, reading every static attribute
// each cycle, its clock moving 10 s a scrape (and standing still within
// one).
func cardSetup(t *testing.T, fs *kmdtest.Sysfs, mutate func(*Config)) *cardBundle {
	t.Helper()
	cfg := createDefaultConfig()
	cfg.SysfsPath = fs.Root
	cfg.Hostname = "bh-glx-c09u02"
	cfg.CardTelemetry.Enabled = true
	if mutate != nil {
		mutate(cfg)
	}
	require.NoError(t, cfg.Validate())
	b := &cardBundle{fs: fs, tick: time.Unix(1_750_000_000, 0)}
	b.s = newCardScraper(cfg, receivertest.NewNopSettings(metadata.Type))
	b.s.reader = ttsysfs.New(ttsysfs.Options{Root: fs.Root, StaticEvery: 1})
	b.s.now = func() time.Time { return b.tick }
	require.NoError(t, b.s.start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, b.s.shutdown(context.Background())) })
	return b
}

func (b *cardBundle) scrape(t *testing.T) pmetric.Metrics {
	t.Helper()
	md, err := b.scrapeErr()
	require.NoError(t, err)
	return md
}

// scrapeErr runs one cycle 10 s after the last.
func (b *cardBundle) scrapeErr() (pmetric.Metrics, error) {
	b.tick = b.tick.Add(10 * time.Second)
	return b.s.scrape(context.Background())
}

// live returns the points of metric name, live ones only, keyed by their
// device label and, for clocks, clock.
func live(md pmetric.Metrics, name string) map[string]pmetric.NumberDataPoint {
	out := map[string]pmetric.NumberDataPoint{}
	forEachNumberPoint(md, name, func(dp pmetric.NumberDataPoint) {
		if dp.Flags().NoRecordedValue() {
			return
		}
		key := attr(dp, "device")
		if c, ok := dp.Attributes().Get("clock"); ok {
			key += "/" + c.Str()
		}
		out[key] = dp
	})
	return out
}

// endedPoints counts the points flagged NoRecordedValue.
func endedPoints(md pmetric.Metrics) (n int, names []string) {
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				var dps pmetric.NumberDataPointSlice
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					dps = m.Gauge().DataPoints()
				case pmetric.MetricTypeSum:
					dps = m.Sum().DataPoints()
				}
				for l := 0; l < dps.Len(); l++ {
					if dps.At(l).Flags().NoRecordedValue() {
						n++
						names = append(names, m.Name())
					}
				}
			}
		}
	}
	return n, names
}

func forEachNumberPoint(md pmetric.Metrics, name string, fn func(pmetric.NumberDataPoint)) {
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				if m.Name() != name {
					continue
				}
				var dps pmetric.NumberDataPointSlice
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					dps = m.Gauge().DataPoints()
				case pmetric.MetricTypeSum:
					dps = m.Sum().DataPoints()
				}
				for l := 0; l < dps.Len(); l++ {
					fn(dps.At(l))
				}
			}
		}
	}
}

// TestCards_Golden reads the shared n300 and p150 trees with every card
// metric on: SI values, the labels of each sensor, and only what the card
// reports (the n300 has no fan and no thermal trip count).
func TestCards_Golden(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"n300", "p150"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := cardSetup(t, kmdtest.CopySysfs(t, kind), allCardMetrics)
			compareGolden(t, "cards_"+kind, b.scrape(t))
		})
	}
}

func TestCards_P150Values(t *testing.T) {
	t.Parallel()
	b := cardSetup(t, kmdtest.CopySysfs(t, "p150"), allCardMetrics)
	md := b.scrape(t)
	for name, want := range map[string]float64{
		"tt_device.temperature": 61.25, "tt_device.power": 86.125, "tt_device.current": 112.5,
		"tt_device.temperature.max": 90, "tt_device.power.max": 300,
	} {
		dp := live(md, name)["0"]
		assert.InDelta(t, want, dp.DoubleValue(), 1e-9, name)
		assert.Equal(t, "bh-glx-c09u02", attr(dp, "hostname"))
	}
	assert.InDelta(t, 0.765, live(md, "tt_device.voltage")["0"].DoubleValue(), 1e-9)
	assert.Equal(t, "asic_temp", attr(live(md, "tt_device.temperature")["0"], "sensor"))
	assert.EqualValues(t, 2430, live(md, "tt_device.fan_speed")["0"].IntValue())
	assert.EqualValues(t, 1350e6, live(md, "tt_device.clock")["0/aiclk"].IntValue())
	assert.EqualValues(t, 800e6, live(md, "tt_device.clock")["0/arcclk"].IntValue())
	assert.EqualValues(t, 2, live(md, "tt_device.thermal_trips")["0"].IntValue())
	assert.EqualValues(t, 0, live(md, "tt_device.heartbeat.stalled")["0"].IntValue())
	info := live(md, "tt_device.info")["0"]
	assert.EqualValues(t, 1, info.IntValue())
	assert.Equal(t, map[string]any{"hostname": "bh-glx-c09u02", "device": "0", "card_type": "p150a", "serial": "0000042731206152",
		"asic_id": "7C2E91D4A0B35F18", "firmware": "18.7.0.0", "m3app_firmware": "0.24.0.0"}, info.Attributes().AsRaw())
}

// The metrics a card may not report are off by default: fan speed (only
// actively cooled cards), thermal trips (Blackhole firmware) and the limits.
func TestCards_DefaultMetrics(t *testing.T) {
	t.Parallel()
	b := cardSetup(t, kmdtest.CopySysfs(t, "p150"), nil)
	md := b.scrape(t)
	var names []string
	for i := 0; i < md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().Len(); i++ {
		names = append(names, md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(i).Name())
	}
	assert.ElementsMatch(t, []string{"tt_device.temperature", "tt_device.voltage", "tt_device.current", "tt_device.power",
		"tt_device.clock", "tt_device.heartbeat.stalled", "tt_device.info"}, names)
}

// TestCards_HeartbeatStops: stalled reads 0 while the heartbeat moves, 1
// once it has not moved for heartbeat_stall_window (30 s: three 10 s
// cycles here), and 0 again as soon as it moves.
func TestCards_HeartbeatStops(t *testing.T) {
	t.Parallel()
	b := cardSetup(t, kmdtest.CopySysfs(t, "n300"), nil)
	stalled := func() int64 {
		t.Helper()
		dp, ok := live(b.scrape(t), "tt_device.heartbeat.stalled")["0"]
		require.True(t, ok)
		return dp.IntValue()
	}
	assert.Zero(t, stalled(), "first read")
	for _, hb := range []string{"1234600", "1234700"} {
		b.fs.Set(0, "tt_heartbeat", hb)
		assert.Zero(t, stalled(), "moving")
	}
	// Stops at 1234700: unchanged 10 s, 20 s, then 30 s.
	assert.Zero(t, stalled())
	assert.Zero(t, stalled())
	assert.EqualValues(t, 1, stalled(), "unchanged for the whole window")
	assert.EqualValues(t, 1, stalled())
	b.fs.Set(0, "tt_heartbeat", "1234701")
	assert.Zero(t, stalled(), "beating again")
}

// A cycle whose reads waited 25 s after its clock (a busy host) saw the
// heartbeat at 1234567 then; the next cycle, 5 s after those reads, sees
// it unchanged. That is 5 s of the firmware's silence, not the 30 s
// between the two cycles' clocks: not stalled.
func TestCards_AReadThatWaitedAfterItsClockIsNoStall(t *testing.T) {
	t.Parallel()
	b := cardSetup(t, kmdtest.CopySysfs(t, "n300"), nil)
	// A cycle's first look at the clock is before its reads; any later
	// one, after them.
	var before, after time.Time
	first := true
	b.s.now = func() time.Time {
		if first {
			first = false
			return before
		}
		return after
	}
	t0 := b.tick
	for i, c := range []struct{ before, after time.Time }{
		{t0, t0.Add(25 * time.Second)},
		{t0.Add(30 * time.Second), t0.Add(30 * time.Second)},
	} {
		before, after, first = c.before, c.after, true
		md, err := b.s.scrape(context.Background())
		require.NoError(t, err)
		dp, ok := live(md, "tt_device.heartbeat.stalled")["0"]
		require.True(t, ok)
		assert.Zero(t, dp.IntValue(), "cycle %d", i+1)
	}
}

// TestCards_HwmonVanishesMidScrape: card 1's hwmon directory goes away
// while the reader holds its sensors open (the driver unregistered it on
// a reset). The scrape does not fail; card 1 keeps its clocks, heartbeat
// and identity, its sensor series end with a staleness point, and card 0
// is untouched. When hwmon comes back, so do the sensors.
func TestCards_HwmonVanishesMidScrape(t *testing.T) {
	t.Parallel()
	fs := kmdtest.BusySysfs(t, t.TempDir(), 2)
	b := cardSetup(t, fs, allCardMetrics)
	md := b.scrape(t)
	require.Contains(t, live(md, "tt_device.temperature"), "1")

	files := fs.RemoveHwmon(1)
	md = b.scrape(t)
	assert.Contains(t, live(md, "tt_device.temperature"), "0")
	assert.NotContains(t, live(md, "tt_device.temperature"), "1")
	assert.Contains(t, live(md, "tt_device.clock"), "1/aiclk")
	assert.Contains(t, live(md, "tt_device.info"), "1")
	n, names := endedPoints(md)
	assert.Equal(t, 10, n, "input and limit of five sensors end: %v", names)

	md = b.scrape(t)
	n, _ = endedPoints(md)
	assert.Zero(t, n, "ended once")

	fs.AddHwmon(1, "hwmon9", files)
	md = b.scrape(t)
	assert.Contains(t, live(md, "tt_device.temperature"), "1")
}

// A new firmware (a flash and a reset) changes the identity: the info
// series with the old version ends, one with the new starts.
func TestCards_FirmwareChangeEndsInfoSeries(t *testing.T) {
	t.Parallel()
	b := cardSetup(t, kmdtest.CopySysfs(t, "p150"), nil)
	b.scrape(t)
	b.fs.Set(0, "tt_fw_bundle_ver", "19.0.0.0")
	md := b.scrape(t)
	var versions []string
	forEachNumberPoint(md, "tt_device.info", func(dp pmetric.NumberDataPoint) {
		versions = append(versions, attr(dp, "firmware")+map[bool]string{true: " ended", false: ""}[dp.Flags().NoRecordedValue()])
	})
	assert.ElementsMatch(t, []string{"18.7.0.0 ended", "19.0.0.0"}, versions)
}

// A card that goes away (its class directory gone) ends every series it had.
func TestCards_CardGoneEndsItsSeries(t *testing.T) {
	t.Parallel()
	fs := kmdtest.BusySysfs(t, t.TempDir(), 2)
	b := cardSetup(t, fs, nil)
	b.scrape(t)
	require.NoError(t, removeAll(fs.CardDir(1)))
	md := b.scrape(t)
	n, _ := endedPoints(md)
	assert.Equal(t, 9, n, "temperature, voltage, current, power, three clocks, heartbeat and info of card 1")
	assert.NotContains(t, live(md, "tt_device.info"), "1")
	assert.Contains(t, live(md, "tt_device.info"), "0")
}

// A real read error is a partial error naming the file; the rest is
// reported.
func TestCards_ReadErrorIsPartial(t *testing.T) {
	t.Parallel()
	fs := kmdtest.CopySysfs(t, "p150")
	fs.Set(0, "tt_aiclk", "n/a")
	b := cardSetup(t, fs, nil)
	md, err := b.scrapeErr()
	require.Error(t, err)
	assert.True(t, scrapererror.IsPartialScrapeError(err))
	assert.True(t, strings.Contains(err.Error(), "tt_aiclk"), err.Error())
	assert.Contains(t, live(md, "tt_device.temperature"), "0")
	assert.NotContains(t, live(md, "tt_device.clock"), "0/aiclk")
	assert.Contains(t, live(md, "tt_device.clock"), "0/axiclk")
}

func TestCards_NoDriverWarnsOnce(t *testing.T) {
	t.Parallel()
	b := cardSetup(t, &kmdtest.Sysfs{Root: t.TempDir()}, nil)
	assert.Zero(t, b.scrape(t).DataPointCount())
	assert.True(t, b.s.warned)
}

func removeAll(path string) error { return os.Remove(path) }
