//go:build stress

package stress

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/test/stress/queuedproc"
)

const (
	stormJobs    = 900
	stormClients = 64
)

// TestStressOneCard: a gate job holds card 0 while 900 jobs arrive from 64
// clients; all are acknowledged with unique ids and queued behind the
// gate; once it opens every job finishes with exit 0, in FIFO order.
func TestStressOneCard(t *testing.T) {
	drain(t, []string{"0"}, stormJobs)
}

// TestStressTwoCards is the same with a gate and 900 jobs on each of two
// cards at once (1800 queued, so the limit is raised to fit), which shows
// the cards' workers drain in parallel.
func TestStressTwoCards(t *testing.T) {
	drain(t, []string{"0", "1"}, stormJobs, "TT_DEVICE_MAX_QUEUED_JOBS=1800")
}

func drain(t *testing.T, cards []string, perCard int, env ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d := start(t, env...)
	c := d.Client()
	defer c.Close()
	work := t.TempDir()

	gates := make(map[string]*queuedproc.Gate)
	gateJobs := make(map[string]string)
	for _, card := range cards {
		g, err := queuedproc.NewGate(filepath.Join(work, "gate"+card))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Queue(ctx, api.QueueRequest{Cmd: g.Cmd, Cwd: work, DeviceID: card, Timeout: 300})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := queuedproc.WaitRunning(ctx, c, resp.JobID); err != nil {
			t.Fatal(err)
		}
		gates[card], gateJobs[card] = g, resp.JobID
	}

	u0, err := d.Usage()
	if err != nil {
		t.Fatal(err)
	}
	total := perCard * len(cards)
	t0 := time.Now()
	subs, err := queuedproc.Storm(ctx, d, stormClients, total, func(i int) api.QueueRequest {
		return api.QueueRequest{Cmd: "/bin/true", Cwd: work, DeviceID: cards[i%len(cards)], ClientID: "stress-" + strconv.Itoa(i)}
	})
	submitTime := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(subs) != total {
		t.Fatalf("%d submissions acknowledged, want %d", len(subs), total)
	}
	ids := make([]string, 0, total)
	seen := make(map[string]bool, total)
	lat := make([]time.Duration, 0, total)
	for _, s := range subs {
		if seen[s.JobID] {
			t.Fatalf("job id %s acknowledged twice", s.JobID)
		}
		seen[s.JobID] = true
		ids = append(ids, s.JobID)
		lat = append(lat, s.Latency)
	}

	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Queued != total {
		t.Fatalf("status queued = %d, want %d", st.Queued, total)
	}
	order := make(map[string][]string) // card -> pending ids in FIFO order
	for _, cs := range st.Cards {
		if len(cs.Pending) == 0 {
			continue
		}
		if cs.Current == nil || cs.Current.ID != gateJobs[cs.DeviceID] {
			t.Fatalf("card %s: current job is not the gate: %+v", cs.DeviceID, cs.Current)
		}
		for _, p := range cs.Pending {
			order[cs.DeviceID] = append(order[cs.DeviceID], p.ID)
		}
	}
	for _, card := range cards {
		if len(order[card]) != perCard {
			t.Fatalf("card %s: %d pending, want %d", card, len(order[card]), perCard)
		}
	}

	u1, err := d.Usage()
	if err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	for _, card := range cards {
		if err := gates[card].Open(ctx); err != nil {
			t.Fatal(err)
		}
	}
	lasts := make([]string, 0, len(cards))
	for _, card := range cards {
		lasts = append(lasts, order[card][perCard-1])
	}
	if _, err := queuedproc.WaitDone(ctx, d, lasts, len(lasts)); err != nil {
		t.Fatal(err)
	}
	drainTime := time.Since(t1)
	u2, err := d.Usage()
	if err != nil {
		t.Fatal(err)
	}

	jobs, err := queuedproc.WaitDone(ctx, d, append(ids, gateIDs(gateJobs)...), 16)
	if err != nil {
		t.Fatal(err)
	}
	for id, j := range jobs {
		if j.State != "done" || j.ExitCode == nil || *j.ExitCode != 0 {
			t.Errorf("job %s: state %s exit %s outcome %s error %q", id, j.State, exitString(j.ExitCode), j.Outcome, j.Error)
		}
	}
	for _, card := range cards {
		checkFIFO(t, card, order[card], jobs)
	}

	t.Logf("cards %v: %d jobs from %d clients, submitted in %v (%.0f/s); submit latency p50 %v p99 %v",
		cards, total, stormClients, submitTime.Round(time.Millisecond), float64(total)/submitTime.Seconds(),
		queuedproc.Percentile(lat, 50).Round(10*time.Microsecond), queuedproc.Percentile(lat, 99).Round(10*time.Microsecond))
	t.Logf("cards %v: drain %v (%.2f ms/job per card); server CPU %v (submission %v + drain %v); jobs' CPU %v; peak RSS %s",
		cards, drainTime.Round(time.Millisecond), float64(drainTime.Microseconds())/1000/float64(perCard),
		u2.CPU-u0.CPU, u1.CPU-u0.CPU, u2.CPU-u1.CPU, u2.ChildCPU-u0.ChildCPU, queuedproc.MiB(u2.PeakRSS))
}

func gateIDs(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, id := range m {
		out = append(out, id)
	}
	return out
}

// checkFIFO: the card ran its jobs in the order it queued them.
func checkFIFO(t *testing.T, card string, order []string, jobs map[string]api.Job) {
	t.Helper()
	starts := make([]time.Time, len(order))
	for i, id := range order {
		j := jobs[id]
		if j.StartedAt == nil || j.DeviceID != card {
			t.Errorf("card %s: job %s has no start or ran on card %s", card, id, j.DeviceID)
			return
		}
		starts[i] = *j.StartedAt
	}
	if !sort.SliceIsSorted(starts, func(a, b int) bool { return starts[a].Before(starts[b]) }) {
		t.Errorf("card %s: jobs did not start in FIFO order", card)
	}
}

func exitString(p *int) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}
