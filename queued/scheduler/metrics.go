package scheduler

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/ttkit/ttkit/internal/ttsysfs"
	"github.com/ttkit/ttkit/queued/store"
)

// The scheduler's own metrics, recorded through Options.MeterProvider
// (OpenTelemetry naming: dot-separated, lowercase, units apart from the
// name; the Prometheus names follow from the collector's translation).
// Every per-card metric has the attribute card (the card number).
const (
	// MetricDepth (gauge, {job}) is how many entries wait in the card's
	// queue: queued jobs and a queued reset; the running one is not
	// counted.
	MetricDepth = "tt_device_queue.depth"
	// MetricCardState (gauge, {state}) has one series per state value
	// (attribute state: healthy, unfit, recovering, dead): 1 for the
	// card's current state, 0 for the others.
	MetricCardState = "tt_device_queue.card.state"
	// MetricFit (gauge, {card}) is 1 while the card passes the fitness
	// gate (see fitness.go), 0 while the gate holds its jobs or it is dead.
	MetricFit = "tt_device_queue.card.fit"
	// MetricGate (histogram, s, attribute result: pass or hold) is how
	// long the gate before a dispatch took, on the card whose worker ran
	// it: microseconds from the sampler's verdict, up to the site probe's
	// run when it was due.
	MetricGate = "tt_device_queue.card.gate.duration"
	// MetricRunningAge (gauge, s) is how long the card's running job (or
	// reset) has run; 0 when nothing runs, and 0 under a hold, which
	// MetricHeld reports instead: a Slurm job's hold lasts as long as the
	// Slurm job, and is no job running long.
	MetricRunningAge = "tt_device_queue.job.running.age"
	// MetricWait (histogram, s, attribute outcome) is the time each job
	// spent queued: until it started, or until it left the queue without
	// starting (killed, or failed with its dead card). Recorded when the
	// job ends, so it can carry the outcome.
	MetricWait = "tt_device_queue.job.wait.duration"
	// MetricRun (histogram, s, attribute outcome) is each started job's
	// run time, every repeat included, recorded when it ends.
	MetricRun = "tt_device_queue.job.run.duration"
	// MetricResets (counter, {reset}, attribute result: ok or failed)
	// counts finished resets.
	MetricResets = "tt_device_queue.card.resets"
	// MetricPersistFailures (counter, {failure}, no card) counts failed
	// writes to the store; each one stops dispatch on every card until
	// the store recovers.
	MetricPersistFailures = "tt_device_queue.persistence.failures"
	// MetricPersistFailing (gauge, {state}, no card) is 1 while writes
	// fail and dispatch is stopped, 0 otherwise.
	MetricPersistFailing = "tt_device_queue.persistence.failing"
	// MetricCrossCard (counter, {job}) counts running jobs seen holding
	// this card though they were queued for others (tt-metal opens every
	// card it sees).
	MetricCrossCard = "tt_device_queue.card.cross_card"
	// MetricHeld (gauge, {hold}) is 1 while a hold holds the card (for a
	// Slurm job, maintenance), 0 otherwise.
	MetricHeld = "tt_device_queue.card.held"
	// MetricCardInfo (gauge, {card}) is 1 with the card's identity as
	// attributes: card_type, serial, asic_id, pci_address (each "" where
	// sysfs gives none).
	MetricCardInfo = "tt_device_queue.card.info"
	// MetricForeign (gauge, {process}) is the number of processes of no
	// running queued job holding the card: status's foreign holders less
	// the processes proven to be other cards' jobs (see jobproof.go), which
	// MetricCrossCard counts. TT_QUEUE_JOB_ID in a process's environment
	// does not make it a job's: a leftover of a finished job and a process
	// forging a running job's id are counted.
	// A Slurm job's processes under a hold are among them. From a holder
	// scan at most HolderMaxAge old.
	MetricForeign = "tt_device_queue.card.foreign"
)

// MeterName is the instrumentation scope of these metrics.
const MeterName = "github.com/ttkit/ttkit/queued/scheduler"

// durationBuckets are the histogram bounds in seconds: device jobs run
// from a fraction of a second to a day.
var durationBuckets = []float64{0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400}

// cardStates lists the values of MetricCardState's state attribute.
var cardStates = []CardState{Healthy, Unfit, Recovering, Dead}

// gateBuckets are the gate's histogram bounds in seconds: a verdict read
// takes microseconds, a fresh heartbeat read up to half a second, a site
// probe seconds to its timeout.
var gateBuckets = []float64{0.0001, 0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 120}

// metrics holds the instruments; with the default no-op provider every
// call does nothing.
type metrics struct {
	meter       metric.Meter
	wait, run   metric.Float64Histogram
	resets      metric.Int64Counter
	persistFail metric.Int64Counter
	crossCards  metric.Int64Counter
	gate        metric.Float64Histogram
	recoveries  metric.Int64Counter
	reg         metric.Registration // the gauges' callback, nil until registered
}

func newMetrics(mp metric.MeterProvider) (*metrics, error) {
	m := &metrics{meter: mp.Meter(MeterName)}
	var err error
	wrap := func(name string, e error) error { return fmt.Errorf("creating metric %s: %w", name, e) }
	if m.wait, err = m.meter.Float64Histogram(MetricWait, metric.WithUnit("s"),
		metric.WithDescription("Time jobs spent queued, by outcome, recorded when they end."),
		metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return nil, wrap(MetricWait, err)
	}
	if m.run, err = m.meter.Float64Histogram(MetricRun, metric.WithUnit("s"),
		metric.WithDescription("Run time of started jobs, every repeat included, by outcome."),
		metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return nil, wrap(MetricRun, err)
	}
	if m.resets, err = m.meter.Int64Counter(MetricResets, metric.WithUnit("{reset}"),
		metric.WithDescription("Finished card resets, by result (ok or failed).")); err != nil {
		return nil, wrap(MetricResets, err)
	}
	if m.persistFail, err = m.meter.Int64Counter(MetricPersistFailures, metric.WithUnit("{failure}"),
		metric.WithDescription("Failed writes to the store; each stops dispatch until the store recovers.")); err != nil {
		return nil, wrap(MetricPersistFailures, err)
	}
	if m.crossCards, err = m.meter.Int64Counter(MetricCrossCard, metric.WithUnit("{job}"),
		metric.WithDescription("Running jobs seen holding this card though they were queued for others.")); err != nil {
		return nil, wrap(MetricCrossCard, err)
	}
	if m.gate, err = m.meter.Float64Histogram(MetricGate, metric.WithUnit("s"),
		metric.WithDescription("Time the fitness gate before a dispatch took, by result (pass or hold)."),
		metric.WithExplicitBucketBoundaries(gateBuckets...)); err != nil {
		return nil, wrap(MetricGate, err)
	}
	if m.recoveries, err = m.meter.Int64Counter(MetricRecoveries, metric.WithUnit("{rung}"),
		metric.WithDescription("Rungs of recovery ladders climbed, by rung and outcome (recovered, unverified, failed).")); err != nil {
		return nil, wrap(MetricRecoveries, err)
	}
	return m, nil
}

// gateTook records one run of the gate before a dispatch on card.
func (m *metrics) gateTook(card int, d time.Duration, held bool) {
	result := "pass"
	if held {
		result = "hold"
	}
	m.gate.Record(context.Background(), d.Seconds(), metric.WithAttributeSet(attribute.NewSet(
		attribute.Int("card", card), attribute.String("result", result))))
}

// crossCard counts a job seen on card though it was not queued for it.
func (m *metrics) crossCard(card int) {
	m.crossCards.Add(context.Background(), 1, metric.WithAttributeSet(attribute.NewSet(attribute.Int("card", card))))
}

// register adds the gauges, read from snapshots of the core under its lock at
// each collection.
func (m *metrics) register(s *core) error {
	depth, err := m.meter.Int64ObservableGauge(MetricDepth, metric.WithUnit("{job}"),
		metric.WithDescription("Entries waiting in the card's queue (jobs and a queued reset)."))
	if err != nil {
		return fmt.Errorf("creating metric %s: %w", MetricDepth, err)
	}
	state, err := m.meter.Int64ObservableGauge(MetricCardState, metric.WithUnit("{state}"),
		metric.WithDescription("1 for the card's current state (healthy, resetting, dead), 0 for the others."))
	if err != nil {
		return fmt.Errorf("creating metric %s: %w", MetricCardState, err)
	}
	age, err := m.meter.Float64ObservableGauge(MetricRunningAge, metric.WithUnit("s"),
		metric.WithDescription("How long the card's running job or reset has run; 0 when idle."))
	if err != nil {
		return fmt.Errorf("creating metric %s: %w", MetricRunningAge, err)
	}
	failing, err := m.meter.Int64ObservableGauge(MetricPersistFailing, metric.WithUnit("{state}"),
		metric.WithDescription("1 while writes to the store fail and dispatch is stopped."))
	if err != nil {
		return fmt.Errorf("creating metric %s: %w", MetricPersistFailing, err)
	}
	held, err := m.meter.Int64ObservableGauge(MetricHeld, metric.WithUnit("{hold}"),
		metric.WithDescription("1 while a hold (a Slurm job's, maintenance) holds the card."))
	if err != nil {
		return fmt.Errorf("creating metric %s: %w", MetricHeld, err)
	}
	info, err := m.meter.Int64ObservableGauge(MetricCardInfo, metric.WithUnit("{card}"),
		metric.WithDescription("1, with the card's type, serial, ASIC id and PCI address as attributes."))
	if err != nil {
		return fmt.Errorf("creating metric %s: %w", MetricCardInfo, err)
	}
	fit, err := m.meter.Int64ObservableGauge(MetricFit, metric.WithUnit("{card}"),
		metric.WithDescription("1 while the card passes the fitness gate, 0 while the gate holds its jobs or it is dead."))
	if err != nil {
		return fmt.Errorf("creating metric %s: %w", MetricFit, err)
	}
	foreign, err := m.meter.Int64ObservableGauge(MetricForeign, metric.WithUnit("{process}"),
		metric.WithDescription("Processes of no queued job holding the card (outside the queue, or a Slurm job's under a hold)."))
	if err != nil {
		return fmt.Errorf("creating metric %s: %w", MetricForeign, err)
	}
	// Counters start at 0 so the series exist before the first event, and
	// increase() in PromQL sees that first event too.
	ctx := context.Background()
	m.persistFail.Add(ctx, 0)
	for _, id := range s.order {
		m.crossCards.Add(ctx, 0, metric.WithAttributeSet(attribute.NewSet(attribute.Int("card", id))))
		for _, result := range []string{ResultOK, ResultFailed} {
			m.resets.Add(ctx, 0, metric.WithAttributeSet(attribute.NewSet(attribute.Int("card", id), attribute.String("result", result))))
		}
	}
	cardAttrs := map[int]metric.MeasurementOption{}
	stateAttrs := map[int][]metric.MeasurementOption{}
	for _, id := range s.order {
		cardAttrs[id] = metric.WithAttributeSet(attribute.NewSet(attribute.Int("card", id)))
		for _, st := range cardStates {
			stateAttrs[id] = append(stateAttrs[id],
				metric.WithAttributeSet(attribute.NewSet(attribute.Int("card", id), attribute.String("state", string(st)))))
		}
	}
	m.reg, err = m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		cards, running, failed := snapshot(s)
		scan := s.holders.get(s.opt.HolderMaxAge)
		for _, c := range cards {
			holders, _ := s.holders.foreignOf(scan, c.id, c.own, running)
			outside := 0
			for _, h := range holders {
				if h.JobID == "" {
					outside++
				}
			}
			o.ObserveInt64(foreign, int64(outside), cardAttrs[c.id])
			var h int64
			if c.held {
				h = 1
			}
			o.ObserveInt64(held, h, cardAttrs[c.id])
			o.ObserveInt64(info, 1, metric.WithAttributeSet(attribute.NewSet(attribute.Int("card", c.id),
				attribute.String("card_type", c.ident.Info.CardType), attribute.String("serial", c.ident.Info.Serial),
				attribute.String("asic_id", c.ident.Info.ASICID), attribute.String("pci_address", c.ident.PCIAddress))))
			var f int64
			if c.state == Healthy {
				f = 1
			}
			o.ObserveInt64(fit, f, cardAttrs[c.id])
			o.ObserveInt64(depth, int64(c.depth), cardAttrs[c.id])
			o.ObserveFloat64(age, c.age.Seconds(), cardAttrs[c.id])
			for i, st := range cardStates {
				var v int64
				if c.state == st {
					v = 1
				}
				o.ObserveInt64(state, v, stateAttrs[c.id][i])
			}
		}
		var f int64
		if failed {
			f = 1
		}
		o.ObserveInt64(failing, f)
		return nil
	}, depth, state, age, failing, info, held, foreign, fit)
	if err != nil {
		return fmt.Errorf("registering the gauges' callback: %w", err)
	}
	return nil
}

// unregister stops the gauges' callback; a second call is a no-op.
func (m *metrics) unregister() {
	if m.reg != nil {
		_ = m.reg.Unregister() // fails only for a registration already gone
		m.reg = nil
	}
}

// jobEnded records a done job's wait and run time. Resets have their own
// counter and are not recorded here; a hold records its wait only, since
// how long a Slurm job held the card says nothing of how long this card's
// queued jobs run.
func (m *metrics) jobEnded(rec *store.Job) {
	if rec.Kind == store.KindReset || rec.FinishedAt.IsZero() {
		return
	}
	attrs := metric.WithAttributeSet(attribute.NewSet(
		attribute.Int("card", rec.Card()), attribute.String("outcome", string(rec.Outcome))))
	ctx := context.Background()
	if rec.StartedAt.IsZero() {
		m.wait.Record(ctx, max(rec.FinishedAt.Sub(rec.SubmittedAt).Seconds(), 0), attrs)
		return
	}
	m.wait.Record(ctx, max(rec.StartedAt.Sub(rec.SubmittedAt).Seconds(), 0), attrs)
	if rec.Kind == store.KindHold {
		return
	}
	m.run.Record(ctx, max(rec.FinishedAt.Sub(rec.StartedAt).Seconds(), 0), attrs)
}

// resetEnded counts a finished reset by result.
func (m *metrics) resetEnded(card int, ok bool) {
	result := ResultFailed
	if ok {
		result = ResultOK
	}
	m.resets.Add(context.Background(), 1, metric.WithAttributeSet(attribute.NewSet(
		attribute.Int("card", card), attribute.String("result", result))))
}

// persistFailed counts a failed write.
func (m *metrics) persistFailed() { m.persistFail.Add(context.Background(), 1) }

// cardSnapshot is what the gauges read of one card.
type cardSnapshot struct {
	id    int
	depth int
	state CardState
	age   time.Duration
	ident ttsysfs.Identity
	held  bool
	own   string // the running job's id, whose processes are not foreign
}

// snapshot reads every card's gauges, the running jobs, and whether
// writes are failing, under the lock.
func snapshot(s *core) ([]cardSnapshot, []ownJob, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opt.Now()
	out := make([]cardSnapshot, 0, len(s.order))
	for _, id := range s.order {
		c := s.cards[id]
		cs := cardSnapshot{id: id, depth: len(c.queue), state: c.shownState(), ident: c.ident,
			held: c.current != nil && c.current.rec.Kind == store.KindHold}
		if c.current != nil {
			cs.own = c.current.rec.ID
		}
		if c.current != nil && !cs.held && !c.current.rec.StartedAt.IsZero() {
			cs.age = max(now.Sub(c.current.rec.StartedAt), 0)
		}
		out = append(out, cs)
	}
	return out, runningOf(s), s.persist.err != nil
}

// MetricRecoveries (counter, {rung}, attributes rung: reset, deep_reset,
// site_1...; outcome: recovered, unverified, failed) counts the rungs of
// recovery ladders climbed on the card: a rung whose command exited 0 but
// whose health check or gate failed is unverified, not recovered.
const MetricRecoveries = "tt_device_queue.card.recoveries"

// rungEnded counts one rung climbed on card.
func (m *metrics) rungEnded(card int, rung, outcome string) {
	m.recoveries.Add(context.Background(), 1, metric.WithAttributeSet(attribute.NewSet(
		attribute.Int("card", card), attribute.String("rung", rung), attribute.String("outcome", outcome))))
}
