package scheduler

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/ttkit/ttkit/queued/store"
)

// readings is one collection from a manual reader, by metric name.
type readings map[string]metricdata.Aggregation

func collect(t *testing.T, r *sdkmetric.ManualReader) readings {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := readings{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != MeterName {
			t.Fatalf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// gauge is the value of a gauge's point with exactly these attributes.
func (r readings) gauge(t *testing.T, name string, kv ...attribute.KeyValue) float64 {
	t.Helper()
	want := attribute.NewSet(kv...)
	switch g := r[name].(type) {
	case metricdata.Gauge[int64]:
		for _, p := range g.DataPoints {
			if p.Attributes.Equals(&want) {
				return float64(p.Value)
			}
		}
	case metricdata.Gauge[float64]:
		for _, p := range g.DataPoints {
			if p.Attributes.Equals(&want) {
				return p.Value
			}
		}
	default:
		t.Fatalf("%s is %T", name, r[name])
	}
	t.Fatalf("%s has no point %v", name, want.Encoded(attribute.DefaultEncoder()))
	return 0
}

// counter is a counter's value for these attributes, 0 without a point.
func (r readings) counter(t *testing.T, name string, kv ...attribute.KeyValue) int64 {
	t.Helper()
	want := attribute.NewSet(kv...)
	s, ok := r[name].(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is %T", name, r[name])
	}
	if !s.IsMonotonic || s.Temporality != metricdata.CumulativeTemporality {
		t.Fatalf("%s: monotonic %v temporality %v", name, s.IsMonotonic, s.Temporality)
	}
	for _, p := range s.DataPoints {
		if p.Attributes.Equals(&want) {
			return p.Value
		}
	}
	t.Fatalf("%s has no point %v (counters start at 0)", name, want.Encoded(attribute.DefaultEncoder()))
	return 0
}

// histogram is a histogram's count and sum for card 0 and an outcome; 0
// where nothing was ever recorded.
func (r readings) histogram(t *testing.T, name string, outcome string) (uint64, float64) {
	t.Helper()
	if r[name] == nil {
		return 0, 0
	}
	want := attribute.NewSet(attribute.Int("card", 0), attribute.String("outcome", outcome))
	h, ok := r[name].(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is %T", name, r[name])
	}
	for _, p := range h.DataPoints {
		if p.Attributes.Equals(&want) {
			return p.Count, p.Sum
		}
	}
	return 0, 0
}

// TestMetrics_KnownSequence drives the scheduler on the fake clock through
// jobs of every outcome, a reset that interrupts a job, a reset that kills
// a card and a persistence failure, and checks every instrument's value.
func TestMetrics_KnownSequence(t *testing.T) {
	t.Parallel()
	clk := newClock()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	b, ctl := setupReset(t, func(o *Options) { o.Now = clk.Now; o.MeterProvider = mp })
	card0, card1 := attribute.Int("card", 0), attribute.Int("card", 1)
	state := func(s CardState) attribute.KeyValue { return attribute.String("state", string(s)) }

	r := collect(t, reader)
	for _, c := range []attribute.KeyValue{card0, card1} {
		if r.gauge(t, MetricDepth, c) != 0 || r.gauge(t, MetricRunningAge, c) != 0 ||
			r.gauge(t, MetricCardState, c, state(Healthy)) != 1 || r.gauge(t, MetricCardState, c, state(Dead)) != 0 {
			t.Fatal("idle cards at start")
		}
	}

	// Killed: one while queued after 3s, one while running after 7s.
	gate, release := b.gate()
	g1 := b.submit(0, gate)
	b.waitOutput(g1.ID, "started")
	q := b.submit(0, "true")
	clk.Advance(3 * time.Second)
	if r := collect(t, reader); r.gauge(t, MetricDepth, card0) != 1 || r.gauge(t, MetricRunningAge, card0) != 3 {
		t.Fatalf("depth %v age %v with one job running 3s and one queued",
			r.gauge(t, MetricDepth, card0), r.gauge(t, MetricRunningAge, card0))
	}
	if _, err := b.s.Kill(q.ID); err != nil {
		t.Fatal(err)
	}
	clk.Advance(4 * time.Second)
	if _, err := b.s.Kill(g1.ID); err != nil {
		t.Fatal(err)
	}
	b.waitDone(g1.ID)
	release()

	b.waitDone(b.submit(0, "true").ID)
	b.waitDone(b.submit(0, "exit 3").ID)
	to, err := b.s.Submit(JobSpec{Card: 0, Cmd: "sleep 30", Cwd: b.work, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b.waitDone(to.ID)

	// A reset interrupts a job that has run 2s and holds the card 5s
	// while a job waits behind it.
	gate2, release2 := b.gate()
	defer release2()
	g2 := b.submit(0, gate2)
	b.waitOutput(g2.ID, "started")
	clk.Advance(2 * time.Second)
	ctl.flag("block-reset", true)
	rs := b.reset(ResetRequest{Card: cardPtr(0)})
	after := b.submit(0, "true")
	b.waitOutput(rs[0].JobID, "reset waiting")
	clk.Advance(5 * time.Second)
	r = collect(t, reader)
	if r.gauge(t, MetricCardState, card0, state(Resetting)) != 1 || r.gauge(t, MetricCardState, card0, state(Healthy)) != 0 ||
		r.gauge(t, MetricDepth, card0) != 1 || r.gauge(t, MetricRunningAge, card0) != 5 || r.gauge(t, MetricDepth, card1) != 0 {
		t.Fatalf("while resetting: resetting %v healthy %v depth %v age %v",
			r.gauge(t, MetricCardState, card0, state(Resetting)), r.gauge(t, MetricCardState, card0, state(Healthy)),
			r.gauge(t, MetricDepth, card0), r.gauge(t, MetricRunningAge, card0))
	}
	ctl.flag("open-reset", true)
	b.waitDone(after.ID)

	// A failed recovery kills card 1.
	ctl.flag("block-reset", false)
	ctl.flag("fail-health", true)
	b.waitDone(b.reset(ResetRequest{Card: cardPtr(1)})[0].JobID)

	r = collect(t, reader)
	for _, c := range []struct {
		outcome   string
		waitCount uint64
		waitSum   float64
		runCount  uint64
		runSum    float64
	}{
		{"success", 2, 5, 2, 0},
		{"failure", 1, 0, 1, 0},
		{"timeout", 1, 0, 1, 0},
		{"killed", 2, 3, 1, 7},
		{"interrupted", 1, 0, 1, 2},
	} {
		wc, ws := r.histogram(t, MetricWait, c.outcome)
		rc, rs := r.histogram(t, MetricRun, c.outcome)
		if wc != c.waitCount || ws != c.waitSum || rc != c.runCount || rs != c.runSum {
			t.Errorf("%s: wait %d/%vs run %d/%vs, want %d/%vs %d/%vs", c.outcome, wc, ws, rc, rs,
				c.waitCount, c.waitSum, c.runCount, c.runSum)
		}
	}
	ok, failed := attribute.String("result", ResultOK), attribute.String("result", ResultFailed)
	if r.counter(t, MetricResets, card0, ok) != 1 || r.counter(t, MetricResets, card0, failed) != 0 ||
		r.counter(t, MetricResets, card1, failed) != 1 || r.counter(t, MetricResets, card1, ok) != 0 {
		t.Fatal("reset counts")
	}
	if r.gauge(t, MetricCardState, card1, state(Dead)) != 1 || r.gauge(t, MetricCardState, card1, state(Healthy)) != 0 ||
		r.gauge(t, MetricCardState, card0, state(Healthy)) != 1 || r.gauge(t, MetricCardState, card0, state(Resetting)) != 0 {
		t.Fatal("card states after the resets")
	}
	if r.counter(t, MetricPersistFailures) != 0 || r.gauge(t, MetricPersistFailing) != 0 {
		t.Fatal("persistence before any failure")
	}

	b.fs.set(always(nil))
	if _, err := b.s.Submit(JobSpec{Card: 0, Cmd: "true", Cwd: b.work}); !errors.Is(err, ErrPersistence) {
		t.Fatalf("Submit while the store fails: %v", err)
	}
	if r := collect(t, reader); r.counter(t, MetricPersistFailures) != 1 || r.gauge(t, MetricPersistFailing) != 1 {
		t.Fatal("persistence failure not counted")
	}
	b.fs.set(nil)
	poll(t, "persistence recovery", func() bool { return b.s.Status().Persistence.OK })
	if r := collect(t, reader); r.counter(t, MetricPersistFailures) != 1 || r.gauge(t, MetricPersistFailing) != 0 {
		t.Fatal("after recovery")
	}

	b.s.Stop()
	if r := collect(t, reader); r[MetricDepth] != nil {
		t.Fatal("a stopped scheduler still reports its gauges")
	}
}

// A hold shows as held, not as a job running long: its age stays 0, and
// when released it records its wait but no run time, so a two-day Slurm
// job does not make the card's queued jobs look slow.
func TestMetrics_Hold(t *testing.T) {
	t.Parallel()
	clk := newClock()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	b := setup(t, func(o *Options) { o.Now = clk.Now; o.MeterProvider = mp })
	card0, card1 := attribute.Int("card", 0), attribute.Int("card", 1)

	if r := collect(t, reader); r.gauge(t, MetricHeld, card0) != 0 || r.gauge(t, MetricHeld, card1) != 0 {
		t.Fatal("held before any hold")
	}
	h, err := b.s.Hold(HoldSpec{Cards: []int{0}, Reason: "slurm job 7", SlurmJobID: "7"})
	if err != nil {
		t.Fatal(err)
	}
	b.wait(h.ID, "active", func(w Watch) bool { return w.Info.State == store.StateRunning })
	clk.Advance(2 * time.Hour)
	r := collect(t, reader)
	if r.gauge(t, MetricHeld, card0) != 1 || r.gauge(t, MetricHeld, card1) != 0 || r.gauge(t, MetricRunningAge, card0) != 0 {
		t.Fatalf("held %v/%v age %v under a hold of two hours",
			r.gauge(t, MetricHeld, card0), r.gauge(t, MetricHeld, card1), r.gauge(t, MetricRunningAge, card0))
	}
	if _, err := b.s.Release(h.ID, "done"); err != nil {
		t.Fatal(err)
	}
	b.waitDone(h.ID)
	r = collect(t, reader)
	if r.gauge(t, MetricHeld, card0) != 0 {
		t.Error("still held after release")
	}
	if wc, _ := r.histogram(t, MetricWait, string(store.OutcomeReleased)); wc != 1 {
		t.Errorf("hold's wait recorded %d times", wc)
	}
	if rc, _ := r.histogram(t, MetricRun, string(store.OutcomeReleased)); rc != 0 {
		t.Errorf("hold's time recorded as a run %d times", rc)
	}
}

// tt_device_queue.card.info names each card's board from sysfs: type,
// serial, ASIC id and PCI address (a T3000's four n300); status does too.
func TestMetrics_CardInfo(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	b := setup(t, func(o *Options) {
		o.Devices = []int{0, 1, 2, 3}
		o.SysfsPath = sysfsTree(t, "t3000")
		o.MeterProvider = mp
	})
	r := collect(t, reader)
	if v := r.gauge(t, MetricCardInfo, attribute.Int("card", 1), attribute.String("card_type", "n300"),
		attribute.String("serial", "100014511e04d0a1"), attribute.String("asic_id", "3a1f0c0e00001111"),
		attribute.String("pci_address", "0000:05:00.0")); v != 1 {
		t.Errorf("card 1's info = %v, want 1", v)
	}
	if c := b.s.Status().Cards[1]; c.Identity.Info.ASICID != "3a1f0c0e00001111" {
		t.Errorf("card 1's identity in status: %+v", c.Identity)
	}
}
