package scheduler

import (
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/store"
)

// benchScheduler starts a one-card scheduler on the fake cards, with the
// gate on or off, for the dispatch benchmarks.
func benchScheduler(tb testing.TB, cards *fakeCards, gateOff bool) *Scheduler {
	dir := tb.TempDir()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	starts, err := store.OpenStartLog(dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { starts.Close() })
	o := Options{Store: st, Starts: starts, Devices: []int{0}, OutputDir: filepath.Join(dir, "output"), MaxQueued: 100000,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), GateOff: gateOff}
	cards.options(&o)
	o.GateInterval = time.Second
	s, err := New(o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// BenchmarkDispatch measures a job's way through one card's queue, from
// Submit to its end, with the fitness gate on and off: the difference is
// what the gate costs a dispatch (no gate command; the sampler's verdict
// is fresh). The job is `true`, so the process start dominates. Run it
// with -count=3 or more: the machine's load moves both by more than the
// gate costs.
func BenchmarkDispatch(b *testing.B) {
	for _, tc := range []struct {
		name string
		off  bool
	}{{"gate=on", false}, {"gate=off", true}} {
		b.Run(tc.name, func(b *testing.B) {
			cards := newFakeCards(b, 0)
			s := benchScheduler(b, cards, tc.off)
			dir := b.TempDir()
			// The first gate after a start judges the heartbeat on two
			// reads half a second apart (a restart trusts no card): once,
			// before the timing, as a running queued has long done it.
			s.core.fit.gate([]int{0})
			for b.Loop() {
				info, err := s.Submit(JobSpec{Card: 0, Cmd: "true", Cwd: dir})
				if err != nil {
					b.Fatal(err)
				}
				for {
					w, err := s.Watch(info.ID)
					if err != nil {
						b.Fatal(err)
					}
					if w.Done {
						break
					}
					<-w.JobChanged
				}
			}
		})
	}
}

// BenchmarkGate measures the gate alone as a worker runs it before a
// dispatch: the sampler's fresh verdict, published to the card.
func BenchmarkGate(b *testing.B) {
	cards := newFakeCards(b, 0)
	s := benchScheduler(b, cards, false)
	f := s.core.fit
	f.gate([]int{0}) // the first judges the heartbeat on two reads
	for b.Loop() {
		f.gate([]int{0})
	}
}

// With no gate command the gate adds at most 1 ms to a dispatch: the
// median of 200 gates with a fresh verdict (it is microseconds; the bound
// leaves room for a loaded machine).
func TestFitness_GateCostsUnderAMillisecond(t *testing.T) {
	t.Parallel()
	cards := newFakeCards(t, 0)
	s := benchScheduler(t, cards, false)
	f := s.core.fit
	f.gate([]int{0})
	took := make([]time.Duration, 200)
	for i := range took {
		began := time.Now()
		f.gate([]int{0})
		took[i] = time.Since(began)
	}
	slices.Sort(took)
	if med := took[len(took)/2]; med > time.Millisecond {
		t.Fatalf("the gate's median is %s; want at most 1ms", med)
	} else {
		t.Logf("gate: median %s, max %s", med, took[len(took)-1])
	}
}
