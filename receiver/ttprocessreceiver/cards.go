package ttprocessreceiver // import "github.com/ttkit/ttkit/receiver/ttprocessreceiver"

import (
	"context"
	"path/filepath"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper/scrapererror"
	"go.uber.org/zap"

	"github.com/ttkit/ttkit/internal/ttsysfs"
	"github.com/ttkit/ttkit/receiver/ttprocessreceiver/internal/metadata"
)

// cardScraper reports each card's health from the tt-kmd driver's sysfs:
// the second scraper of the receiver, on when card_telemetry.enabled is.
type cardScraper struct {
	cfg    *Config
	logger *zap.Logger
	mb     *metadata.MetricsBuilder
	reader *ttsysfs.Reader
	now    func() time.Time

	hostname string
	cards    []ttsysfs.Card // scratch, reused every cycle
	state    map[int]*cardHealth
	gen      uint64
	warned   bool // no card found: said once
}

// cardHealth is what the scraper keeps of one card between cycles.
type cardHealth struct {
	label string // the device label, N
	seen  uint64
	// last is what the previous cycle reported, so that a series the card
	// no longer has (a vanished hwmon, a new firmware version in
	// tt_device.info) can be ended with a staleness point.
	last     ttsysfs.Card
	reported bool
	// heartbeat is the last value read; changed is when it last changed
	// (or was first read); stalled is the value last reported.
	heartbeat uint64
	beating   bool
	changed   time.Time
	stalled   int64
}

func newCardScraper(cfg *Config, set receiver.Settings) *cardScraper {
	return &cardScraper{
		cfg:    cfg,
		logger: set.Logger,
		mb:     metadata.NewMetricsBuilder(cfg.MetricsBuilderConfig, set),
		reader: ttsysfs.New(ttsysfs.Options{Root: cfg.SysfsPath}),
		now:    time.Now,
		state:  make(map[int]*cardHealth),
	}
}

func (s *cardScraper) start(context.Context, component.Host) error {
	hostname, err := resolveHostname(s.cfg)
	if err != nil {
		return err
	}
	s.hostname = hostname
	s.logger.Info("Reading card telemetry from the tt-kmd driver's sysfs",
		zap.String("path", filepath.Join(s.cfg.SysfsPath, "class", "tenstorrent")),
		zap.Duration("heartbeat_stall_window", s.cfg.CardTelemetry.HeartbeatStallWindow))
	return nil
}

func (s *cardScraper) shutdown(context.Context) error { return s.reader.Close() }

// scrape reads every card and records its metrics. A series the previous
// cycle reported and this one cannot (its card or hwmon directory gone, an
// identity that changed) gets one last point flagged NoRecordedValue, under
// a resource of its own emitted first, so that Prometheus drops it at once.
func (s *cardScraper) scrape(context.Context) (pmetric.Metrics, error) {
	now := s.now()
	ts := pcommon.NewTimestampFromTime(now)
	cards, errs := s.reader.Read(s.cards[:0])
	read := s.now() // every value read was so by then
	s.cards = cards
	s.gen++

	ended := false
	for i := range cards {
		c := &cards[i]
		st := s.state[c.Number]
		if st == nil {
			st = &cardHealth{label: strconv.Itoa(c.Number)}
			s.state[c.Number] = st
		}
		st.seen = s.gen
		if st.reported {
			if gone, some := vanished(&st.last, c); some {
				s.record(ts, st, &gone)
				ended = true
			}
		}
	}
	for n, st := range s.state {
		if st.seen != s.gen {
			if st.reported {
				s.record(ts, st, &st.last)
				ended = true
			}
			delete(s.state, n)
		}
	}
	if ended {
		s.mb.EmitForResource(metadata.WithResource(s.resource()))
	}

	for i := range cards {
		c := &cards[i]
		st := s.state[c.Number]
		s.beat(now, read, st, c)
		s.record(ts, st, c)
		st.last, st.reported = *c, true
	}
	md := s.mb.Emit(metadata.WithResource(s.resource()))
	if ended {
		markStale(md.ResourceMetrics().At(0))
	}
	s.warnIfNoCards(len(cards), len(errs))

	var scrapeErrs scrapererror.ScrapeErrors
	for _, err := range errs {
		scrapeErrs.AddPartial(1, err)
	}
	return md, scrapeErrs.Combine()
}

func (s *cardScraper) resource() pcommon.Resource {
	rb := s.mb.NewResourceBuilder()
	rb.SetHostName(s.hostname)
	return rb.Emit()
}

// beat follows a card's heartbeat: stalled is 1 once it has not changed
// for heartbeat_stall_window, 0 while it moves. A heartbeat first read, or
// read again after it was absent, starts its window afresh. now is the
// cycle's clock, taken before its reads, and read the clock after them:
// the window runs from the end of the read that saw a value, so a cycle
// whose reads waited (a busy host) never counts the wait as the
// firmware's silence.
func (s *cardScraper) beat(now, read time.Time, st *cardHealth, c *ttsysfs.Card) {
	if !c.Heartbeat.OK {
		st.beating = false
		return
	}
	if !st.beating || c.Heartbeat.Value != st.heartbeat {
		st.heartbeat, st.beating, st.changed = c.Heartbeat.Value, true, read
	}
	st.stalled = 0
	if now.Sub(st.changed) >= s.cfg.CardTelemetry.HeartbeatStallWindow {
		st.stalled = 1
	}
}

// record records every metric card c has a value for.
func (s *cardScraper) record(ts pcommon.Timestamp, st *cardHealth, c *ttsysfs.Card) {
	host, dev := s.hostname, st.label
	if v := c.Temperature; v.Input.OK {
		s.mb.RecordTtDeviceTemperatureDataPoint(ts, v.Input.Value, host, dev, v.Label)
	}
	if v := c.Temperature; v.Max.OK {
		s.mb.RecordTtDeviceTemperatureMaxDataPoint(ts, v.Max.Value, host, dev, v.Label)
	}
	if v := c.Voltage; v.Input.OK {
		s.mb.RecordTtDeviceVoltageDataPoint(ts, v.Input.Value, host, dev, v.Label)
	}
	if v := c.Voltage; v.Max.OK {
		s.mb.RecordTtDeviceVoltageMaxDataPoint(ts, v.Max.Value, host, dev, v.Label)
	}
	if v := c.Current; v.Input.OK {
		s.mb.RecordTtDeviceCurrentDataPoint(ts, v.Input.Value, host, dev, v.Label)
	}
	if v := c.Current; v.Max.OK {
		s.mb.RecordTtDeviceCurrentMaxDataPoint(ts, v.Max.Value, host, dev, v.Label)
	}
	if v := c.Power; v.Input.OK {
		s.mb.RecordTtDevicePowerDataPoint(ts, v.Input.Value, host, dev, v.Label)
	}
	if v := c.Power; v.Max.OK {
		s.mb.RecordTtDevicePowerMaxDataPoint(ts, v.Max.Value, host, dev, v.Label)
	}
	if v := c.Fan; v.Input.OK {
		s.mb.RecordTtDeviceFanSpeedDataPoint(ts, int64(v.Input.Value), host, dev, v.Label)
	}
	if v := c.Fan; v.Max.OK {
		s.mb.RecordTtDeviceFanSpeedMaxDataPoint(ts, int64(v.Max.Value), host, dev, v.Label)
	}
	for _, clk := range [...]struct {
		r ttsysfs.Reading
		a metadata.AttributeClock
	}{{c.AIClock, metadata.AttributeClockAiclk}, {c.AXIClock, metadata.AttributeClockAxiclk}, {c.ARCClock, metadata.AttributeClockArcclk}} {
		if clk.r.OK {
			s.mb.RecordTtDeviceClockDataPoint(ts, int64(clk.r.Value), host, dev, clk.a)
		}
	}
	if c.Heartbeat.OK {
		s.mb.RecordTtDeviceHeartbeatStalledDataPoint(ts, st.stalled, host, dev)
	}
	if c.ThermalTrips.OK {
		s.mb.RecordTtDeviceThermalTripsDataPoint(ts, int64(c.ThermalTrips.Value), host, dev)
	}
	if i := c.Info; i != (ttsysfs.Info{}) {
		s.mb.RecordTtDeviceInfoDataPoint(ts, 1, host, dev, i.CardType, i.Serial, i.ASICID, i.FirmwareBundle, i.M3AppFirmware)
	}
}

// vanished returns what last had that now has not: every reading now
// lacks, and every labelled part (a sensor whose label changed, the
// identity) whose labels changed, with last's values. some reports that
// there is something.
func vanished(last, now *ttsysfs.Card) (gone ttsysfs.Card, some bool) {
	gone.Number = last.Number
	sensor := func(l, n ttsysfs.Sensor) ttsysfs.Sensor {
		var g ttsysfs.Sensor
		g.Label = l.Label
		relabelled := l.Label != n.Label
		if l.Input.OK && (!n.Input.OK || relabelled) {
			g.Input, some = l.Input, true
		}
		if l.Max.OK && (!n.Max.OK || relabelled) {
			g.Max, some = l.Max, true
		}
		return g
	}
	gone.Temperature = sensor(last.Temperature, now.Temperature)
	gone.Voltage = sensor(last.Voltage, now.Voltage)
	gone.Current = sensor(last.Current, now.Current)
	gone.Power = sensor(last.Power, now.Power)
	gone.Fan = sensor(last.Fan, now.Fan)
	reading := func(l, n ttsysfs.Reading) ttsysfs.Reading {
		if l.OK && !n.OK {
			some = true
			return l
		}
		return ttsysfs.Reading{}
	}
	gone.AIClock = reading(last.AIClock, now.AIClock)
	gone.AXIClock = reading(last.AXIClock, now.AXIClock)
	gone.ARCClock = reading(last.ARCClock, now.ARCClock)
	if last.Heartbeat.OK && !now.Heartbeat.OK {
		gone.Heartbeat, some = last.Heartbeat, true
	}
	if last.ThermalTrips.OK && !now.ThermalTrips.OK {
		gone.ThermalTrips, some = last.ThermalTrips, true
	}
	if last.Info != (ttsysfs.Info{}) && last.Info != now.Info {
		gone.Info, some = last.Info, true
	}
	return gone, some
}

// markStale flags every point of rm as NoRecordedValue.
func markStale(rm pmetric.ResourceMetrics) {
	stale := pmetric.DefaultDataPointFlags.WithNoRecordedValue(true)
	sms := rm.ScopeMetrics()
	for i := 0; i < sms.Len(); i++ {
		ms := sms.At(i).Metrics()
		for j := 0; j < ms.Len(); j++ {
			m := ms.At(j)
			var dps pmetric.NumberDataPointSlice
			switch m.Type() {
			case pmetric.MetricTypeGauge:
				dps = m.Gauge().DataPoints()
			case pmetric.MetricTypeSum:
				dps = m.Sum().DataPoints()
			default:
				continue
			}
			for k := 0; k < dps.Len(); k++ {
				dps.At(k).SetFlags(stale)
			}
		}
	}
}

// warnIfNoCards warns once when card telemetry finds no card at all: no
// tt-kmd loaded, or a container that does not see the host's /sys.
func (s *cardScraper) warnIfNoCards(cards, errs int) {
	if s.warned || cards > 0 || errs > 0 {
		return
	}
	s.warned = true
	s.logger.Warn("Card telemetry is on but there is no card under sysfs_path: no tenstorrent class directory "+
		"(is the tt-kmd driver loaded? lsmod | grep tenstorrent), or sysfs_path does not show the host's /sys",
		zap.String("path", filepath.Join(s.cfg.SysfsPath, "class", "tenstorrent")))
}
