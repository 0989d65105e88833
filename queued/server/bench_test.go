package server

import (
	"fmt"
	"github.com/ttkit/ttkit/queued/api"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/scheduler"
	"github.com/ttkit/ttkit/queued/store"
)

// BenchmarkSubmit64 measures POST /queue with 64 concurrent clients
// against a real daemon (bbolt on disk, every submission durable before
// its answer) while both cards are held by a gate job, and reports
// throughput and the p50/p99 latency of one submission.
func BenchmarkSubmit64(b *testing.B) {
	d := start(b, options{sched: func(o *scheduler.Options) { o.MaxQueued = 1 << 30 }})
	gate, release := d.gate()
	for _, card := range []string{"0", "1"} {
		d.waitOutput(d.queue(card, gate).JobID, "started")
	}
	defer release()
	const clients = 64
	lat := make([][]time.Duration, clients)
	per := b.N/clients + 1
	b.ResetTimer()
	t0 := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := api.NewClient(d.url, d.token)
			defer cl.Close()
			card := []string{"0", "1"}[c%2]
			for range per {
				s := time.Now()
				if _, err := cl.Queue(d.ctx(), api.QueueRequest{Cmd: "true", Cwd: d.work, DeviceID: card}); err != nil {
					b.Error(err)
					return
				}
				lat[c] = append(lat[c], time.Since(s))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	b.StopTimer()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	q := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "submits/s")
	st := d.st.Stats()
	b.ReportMetric(float64(st.Writes)/float64(st.Commits), "writes/commit")
}

// BenchmarkDecodeQueue measures decoding one typical POST /queue body
// (the whole field-by-field validation, cwd's stat included).
func BenchmarkDecodeQueue(b *testing.B) {
	d := start(b, options{})
	body := []byte(`{"cmd":"python3 my_device1_script.py --steps 100 | tee out.log","cwd":"` + d.work +
		`","device_id":"1","env":{"A":"1","PYTHONPATH":"/opt/lib","TT_METAL_HOME":"/opt/tt"},"timeout":600,"repeat":2,"client_id":"bench"}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.srv.submissions.decodeQueue(fuzzRequest(body)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStatusHistory measures GET /status over a history of 20,000
// finished jobs, all on card 1: the Python tool's "recent" of card 0 then
// finds none and reads recentScan records, its worst case, once per
// change of the scheduler (recentCache). With the history on card 0 the
// newest records answer at once.
func BenchmarkStatusHistory(b *testing.B) {
	for _, card := range []int{1, 0} {
		b.Run(fmt.Sprintf("history on card %d", card), func(b *testing.B) {
			dir := b.TempDir()
			st, err := store.Open(dir, store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			recs := make([]store.Job, 20000)
			for i := range recs {
				code := 0
				recs[i] = store.Job{ID: store.NewID(), Seq: uint64(i + 1), Kind: store.KindJob, Device: &card, Cmd: "python3 train.py",
					Cwd: "/tmp", Timeout: 3600, Repeat: 1, State: store.StateDone, SubmittedAt: now, StartedAt: now, FinishedAt: now,
					ExitCode: &code, Outcome: store.OutcomeSuccess, Iterations: 1}
			}
			if err := st.Put(recs...); err != nil {
				b.Fatal(err)
			}
			st.Close()
			d := start(b, options{dir: dir})
			b.ResetTimer()
			for range b.N {
				if _, err := d.client.Status(d.ctx()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
