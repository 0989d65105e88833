package scheduler

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// tt_device_queue.card.fit is 1 for a fit card and 0 for an unfit one,
// whose card.state series says unfit; the gate's time before each
// dispatch is in tt_device_queue.card.gate.duration by result.
func TestMetrics_Fitness(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	cards := newFakeCards(t, 0, 1)
	b := setup(t, func(o *Options) { cards.options(o); o.MeterProvider = mp })
	cards.beat(1, false)
	waitCard(b, 1, "unfit", func(c CardStatus) bool { return c.State == Unfit })
	b.waitDone(b.submit(0, "true").ID)
	held := b.submit(1, "true")
	card := func(n int) attribute.KeyValue { return attribute.Int("card", n) }
	// gates counts the gate's durations by card and result.
	gates := func(r readings) map[string]uint64 {
		got := map[string]uint64{}
		h, ok := r[MetricGate].(metricdata.Histogram[float64])
		if !ok {
			t.Fatalf("%s is %T", MetricGate, r[MetricGate])
		}
		for _, p := range h.DataPoints {
			c, _ := p.Attributes.Value("card")
			res, _ := p.Attributes.Value("result")
			got[c.Emit()+"/"+res.AsString()] += p.Count
		}
		return got
	}
	var r readings
	poll(t, "the gate holding card 1's job, in the metrics", func() bool {
		r = collect(t, reader)
		got := gates(r)
		return got["0/pass"] > 0 && got["1/hold"] > 0
	})
	if f0, f1 := r.gauge(t, MetricFit, card(0)), r.gauge(t, MetricFit, card(1)); f0 != 1 || f1 != 0 {
		t.Errorf("card.fit: card 0 %v, card 1 %v; want 1 and 0", f0, f1)
	}
	if u, h := r.gauge(t, MetricCardState, card(1), attribute.String("state", "unfit")),
		r.gauge(t, MetricCardState, card(1), attribute.String("state", "healthy")); u != 1 || h != 0 {
		t.Errorf("card 1's card.state: unfit %v, healthy %v", u, h)
	}
	cards.beat(1, true)
	b.waitDone(held.ID)
}
