package scheduler

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/store"
)

// timedCmd prints "go" at the start of each iteration, then waits for the
// file named by $GATE and removes it, so a test decides when each
// iteration ends. variant (a shell comment) makes a distinct command.
func timedCmd(variant string) string {
	return "# " + variant + "\necho go; while [ ! -e \"$GATE\" ]; do sleep 0.01; done; rm -f \"$GATE\""
}

// timedJob is a submitted timedCmd job and its gate file.
type timedJob struct {
	JobInfo
	gate string
}

func (b *bundle) submitTimed(card int, variant string, repeat int) timedJob {
	b.t.Helper()
	gate := filepath.Join(b.t.TempDir(), "gate")
	info, err := b.s.Submit(JobSpec{Card: card, Cmd: timedCmd(variant), Cwd: b.work, Env: map[string]string{"GATE": gate}, Repeat: repeat})
	if err != nil {
		b.t.Fatal(err)
	}
	return timedJob{JobInfo: info, gate: gate}
}

// waitIteration waits until iteration n (from 1) of a timed job has
// started: its output is there, and the scheduler has recorded its start
// (the process may print before the runner reports it started, and the
// estimates count from that report).
func (b *bundle) waitIteration(j timedJob, n int) {
	b.t.Helper()
	b.wait(j.ID, fmt.Sprintf("iteration %d", n), func(w Watch) bool {
		data, _ := os.ReadFile(w.Path)
		return strings.Count(string(data), "go\n") >= n
	})
	poll(b.t, fmt.Sprintf("iteration %d recorded", n), func() bool {
		info, err := b.s.Job(j.ID)
		return err == nil && (info.Iterations >= n || info.State == store.StateDone)
	})
}

// endIteration lets the running iteration of a timed job end.
func (b *bundle) endIteration(j timedJob) {
	b.t.Helper()
	if err := os.WriteFile(j.gate, nil, 0o600); err != nil {
		b.t.Fatal(err)
	}
}

// runTimed runs variant on an idle card with iterations of exactly the
// given lengths on the fake clock and returns its done record.
func (b *bundle) runTimed(clk *clock, card int, variant string, iterations ...time.Duration) JobInfo {
	b.t.Helper()
	j := b.submitTimed(card, variant, len(iterations))
	for i, d := range iterations {
		b.waitIteration(j, i+1)
		clk.Advance(d)
		b.endIteration(j)
	}
	return b.waitDone(j.ID)
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func TestEstimates_DefaultWithoutHistory(t *testing.T) {
	t.Parallel()
	clk := newClock()
	b := setup(t, func(o *Options) { o.Now = clk.Now })
	gate, release := b.gate()
	g := b.submit(0, gate)
	if g.Position != 1 || g.EstimatedWait != 0 || g.EstimatedRun != DefaultRunEstimate {
		t.Fatalf("first job: %+v", g)
	}
	b.waitOutput(g.ID, "started")
	clk.Advance(10 * time.Second)
	one := b.submit(0, "true")
	two, err := b.s.Submit(JobSpec{Card: 0, Cmd: "true", Cwd: b.work, Repeat: 2})
	if err != nil {
		t.Fatal(err)
	}
	three := b.submit(0, "true")
	// No history: 60s per iteration; the gate has run 10s.
	for _, c := range []struct {
		name      string
		got       JobInfo
		pos       int
		wait, run time.Duration
	}{
		{"one", one, 1, 50 * time.Second, 60 * time.Second},
		{"two", two, 2, 110 * time.Second, 120 * time.Second},
		{"three", three, 3, 230 * time.Second, 60 * time.Second},
	} {
		if c.got.Position != c.pos || c.got.EstimatedWait != c.wait || c.got.EstimatedRun != c.run {
			t.Errorf("%s: position %d wait %s run %s, want %d %s %s", c.name, c.got.Position, c.got.EstimatedWait, c.got.EstimatedRun, c.pos, c.wait, c.run)
		}
	}
	st := b.s.Status()
	if c := st.Cards[0]; c.Current == nil || c.Current.ID != g.ID || c.Current.EstimatedWait != 50*time.Second ||
		len(c.Queue) != 3 || c.Queue[1].ID != two.ID || c.Queue[1].EstimatedWait != 110*time.Second ||
		c.Queue[1].EstimatedRun != 120*time.Second || c.EstimatedWait != 290*time.Second {
		t.Fatalf("card 0 status: %+v", c)
	}
	if c := st.Cards[1]; c.EstimatedWait != 0 {
		t.Fatalf("card 1 status: %+v", c)
	}
	clk.Advance(70 * time.Second) // the gate overruns its estimate: waits are never negative
	if info, _ := b.s.Job(one.ID); info.EstimatedWait != 0 {
		t.Fatalf("overrun wait = %s", info.EstimatedWait)
	}
	if info, _ := b.s.Job(g.ID); info.EstimatedWait != 0 {
		t.Fatalf("overrun remaining = %s", info.EstimatedWait)
	}
	release()
	b.waitDone(three.ID)
}

// TestEstimates_LearnedFromHistory runs commands of known lengths on the
// fake clock and checks every estimate exactly: the same command's median,
// then the card's, repeats, the running job's iterations left, and the
// history surviving a restart.
func TestEstimates_LearnedFromHistory(t *testing.T) {
	t.Parallel()
	clk := newClock()
	b := setup(t, func(o *Options) { o.Now = clk.Now })
	for _, d := range []time.Duration{10, 30, 20} {
		b.runTimed(clk, 0, "x", d*time.Second)
	}
	b.runTimed(clk, 0, "y", 50*time.Second, 150*time.Second) // 100s per iteration
	// x: median of 10, 30, 20 = 20s. The card: median of 10, 30, 20, 100 = 25s.
	// Card 1 has no history of its own.

	r := b.submitTimed(0, "x", 3)
	if r.EstimatedRun != 60*time.Second || r.EstimatedWait != 0 {
		t.Fatalf("x×3 at submit: run %s wait %s", r.EstimatedRun, r.EstimatedWait)
	}
	b.waitIteration(r, 1)
	q1 := b.submitTimed(0, "x", 2)
	q2 := b.submitTimed(0, "z", 1) // never seen: the card's median
	other := b.submitTimed(1, "x", 1)
	if q1.Position != 1 || q1.EstimatedRun != 40*time.Second || q1.EstimatedWait != 60*time.Second {
		t.Errorf("q1: %d %s %s", q1.Position, q1.EstimatedRun, q1.EstimatedWait)
	}
	if q2.Position != 2 || q2.EstimatedRun != 25*time.Second || q2.EstimatedWait != 100*time.Second {
		t.Errorf("q2: %d %s %s", q2.Position, q2.EstimatedRun, q2.EstimatedWait)
	}
	if other.EstimatedRun != DefaultRunEstimate {
		t.Errorf("x on card 1 learned from card 0: %s", other.EstimatedRun)
	}
	if c := b.card(0); c.EstimatedWait != 125*time.Second {
		t.Errorf("card 0 wait %s, want 125s", c.EstimatedWait)
	}

	clk.Advance(5 * time.Second) // 5s into iteration 1 of 3
	if info, _ := b.s.Job(r.ID); info.EstimatedWait != 55*time.Second || info.EstimatedRun != 60*time.Second {
		t.Errorf("running after 5s: remaining %s run %s", info.EstimatedWait, info.EstimatedRun)
	}
	b.endIteration(r)
	b.waitIteration(r, 2)
	clk.Advance(30 * time.Second) // iteration 2 overruns its 20s: 0 left of it, one more to go
	if info, _ := b.s.Job(r.ID); info.EstimatedWait != 20*time.Second {
		t.Errorf("running in iteration 2 after 30s: remaining %s, want 20s", info.EstimatedWait)
	}
	if info, _ := b.s.Job(q2.ID); info.EstimatedWait != 60*time.Second {
		t.Errorf("q2 wait %s, want 60s", info.EstimatedWait)
	}
	b.endIteration(r)
	b.waitIteration(r, 3)
	clk.Advance(25 * time.Second)
	b.endIteration(r)
	b.waitDone(r.ID)
	// x: 10, 30, 20, 20 -> 20s; the card: 10, 30, 20, 100, 20 -> 20s.
	for _, j := range []timedJob{q1, q2, other} {
		if _, err := b.s.Kill(j.ID); err != nil {
			t.Fatal(err)
		}
		b.waitDone(j.ID)
	}

	b.restart() // the history comes back from the store; killed jobs taught nothing
	x := b.submitTimed(0, "x", 1)
	z := b.submitTimed(0, "z", 2)
	if x.EstimatedRun != 20*time.Second || z.EstimatedRun != 40*time.Second || z.EstimatedWait != 20*time.Second {
		t.Errorf("after restart: x run %s, z run %s wait %s", x.EstimatedRun, z.EstimatedRun, z.EstimatedWait)
	}
	b.s.Kill(z.ID)
	b.s.Kill(x.ID)
	b.waitDone(x.ID)
}

// TestEstimates_ConcurrentSubmitsMatchStatus submits from 32 clients at
// once behind a held card: each answer's position and wait, found from the
// tail, must be what status shows afterwards.
func TestEstimates_ConcurrentSubmitsMatchStatus(t *testing.T) {
	t.Parallel()
	clk := newClock()
	b := setup(t, func(o *Options) { o.Now = clk.Now })
	b.runTimed(clk, 0, "a", 7*time.Second)
	b.runTimed(clk, 0, "b", 3*time.Second)
	gate, release := b.gate()
	g := b.submit(0, gate)
	b.waitOutput(g.ID, "started")
	var mu sync.Mutex
	answers := map[string]JobInfo{}
	var wg sync.WaitGroup
	for c := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 8 {
				info, err := b.s.Submit(JobSpec{Card: 0, Cmd: timedCmd([]string{"a", "b", "c"}[(c+i)%3]), Cwd: b.work, Repeat: 1 + i%3})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				answers[info.ID] = info
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	c := b.card(0)
	if len(c.Queue) != 256 {
		t.Fatalf("%d queued", len(c.Queue))
	}
	for _, q := range c.Queue {
		a := answers[q.ID]
		if a.Position != q.Position || a.EstimatedWait != q.EstimatedWait || a.EstimatedRun != q.EstimatedRun {
			t.Fatalf("job at %d: answered position %d wait %s run %s; status %d %s %s",
				q.Position, a.Position, a.EstimatedWait, a.EstimatedRun, q.Position, q.EstimatedWait, q.EstimatedRun)
		}
	}
	last := c.Queue[len(c.Queue)-1]
	if c.EstimatedWait != last.EstimatedWait+last.EstimatedRun {
		t.Fatalf("card wait %s, last job %s + %s", c.EstimatedWait, last.EstimatedWait, last.EstimatedRun)
	}
	for _, q := range c.Queue {
		b.s.Kill(q.ID)
	}
	release()
	b.waitDone(g.ID)
}

func TestEstimator_MedianOfLastRuns(t *testing.T) {
	t.Parallel()
	var r recent
	for i, c := range []struct {
		add  time.Duration
		want time.Duration
	}{{10, 10}, {30, 20}, {20, 20}, {100, 25}} {
		r.add(c.add)
		if r.median != c.want {
			t.Fatalf("after %d adds: median %d, want %d", i+1, r.median, c.want)
		}
	}
	for range HistorySize {
		r.add(7)
	}
	if r.n != HistorySize || r.median != 7 {
		t.Fatalf("ring keeps %d, median %d", r.n, r.median)
	}
}

// TestEstimator_BoundedCommands checks the command history is capped at
// MaxCommands per card, forgetting the least recently finished command,
// and that jobs queued for a forgotten command fall back to the card's
// median.
func TestEstimator_BoundedCommands(t *testing.T) {
	t.Parallel()
	e := newEstimator()
	key := func(i int) cmdKey { return keyOf(fmt.Sprintf("cmd %d", i)) }
	e.enqueue(key(0), 2)
	for i := range MaxCommands + 50 {
		e.observe(key(i), time.Duration(i+1)*time.Second, true)
		if i == 100 {
			e.observe(key(1), time.Second, true) // key 1 is recent again
		}
	}
	if len(e.cmds) != MaxCommands || e.lru.Len() != MaxCommands {
		t.Fatalf("%d commands kept (%d in the LRU list), want %d", len(e.cmds), e.lru.Len(), MaxCommands)
	}
	// 306 commands, 256 kept: the 50 forgotten are 0 and 2..50; 1 finished
	// again after 100 did.
	for i, kept := range map[int]bool{0: false, 1: true, 2: false, 50: false, 51: true, MaxCommands + 49: true} {
		if (e.cmds[key(i)] != nil) != kept {
			t.Errorf("command %d kept = %v, want %v", i, !kept, kept)
		}
	}
	if got, want := e.queuedRun(), 2*e.cardIteration(); got != want {
		t.Fatalf("forgotten command's queued jobs: %s, want 2 × card median = %s", got, want)
	}
}

// TestEstimator_RunningSumMatchesWalk applies random enqueues, dequeues
// and observations (with evictions) and compares the running sum with a
// walk of the queue after every step.
func TestEstimator_RunningSumMatchesWalk(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	e := newEstimator()
	type entry struct {
		k cmdKey
		n int
	}
	var queue []entry
	keys := make([]cmdKey, MaxCommands+40)
	for i := range keys {
		keys[i] = keyOf(fmt.Sprint(i))
	}
	for step := range 20000 {
		switch op := rng.IntN(3); {
		case op == 0 || len(queue) == 0:
			en := entry{keys[rng.IntN(len(keys))], 1 + rng.IntN(5)}
			e.enqueue(en.k, en.n)
			queue = append(queue, en)
		case op == 1:
			i := rng.IntN(len(queue))
			e.dequeue(queue[i].k, queue[i].n)
			queue = append(queue[:i], queue[i+1:]...)
		default:
			e.observe(keys[rng.IntN(len(keys))], time.Duration(rng.IntN(1000))*time.Millisecond, rng.IntN(4) > 0)
		}
		var walk time.Duration
		for _, en := range queue {
			walk += e.iteration(en.k) * time.Duration(en.n)
		}
		if got := e.queuedRun(); got != walk || e.fallback < 0 || len(e.cmds) > MaxCommands {
			t.Fatalf("step %d: running sum %s, walk %s, fallback %d, %d commands", step, got, walk, e.fallback, len(e.cmds))
		}
	}
	for _, en := range queue {
		e.dequeue(en.k, en.n)
	}
	if e.keyed != 0 || e.fallback != 0 || len(e.queued) != 0 {
		t.Fatalf("empty queue leaves keyed %s fallback %d queued %d", e.keyed, e.fallback, len(e.queued))
	}
}

// TestEstimates_Accuracy runs real `sleep` commands of known lengths one
// after another, then a batch behind each other, and logs how far each
// estimate given at submission was from what happened. The figures are
// the point: on a loaded machine runs stretch and the estimates with
// them, so it asserts only what load cannot break.
func TestEstimates_Accuracy(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	cmds := []string{"sleep 0.2", "sleep 0.4"}
	seen := map[string]bool{}
	var sumErr, sumRel float64
	var n int
	for i := range 8 {
		cmd := cmds[i%2]
		info := b.submit(0, cmd)
		done := b.waitDone(info.ID)
		actual := done.FinishedAt.Sub(done.StartedAt)
		e := info.EstimatedRun - actual
		t.Logf("sequential %-9s estimated run %6.3fs actual %6.3fs error %+6.3fs", cmd, info.EstimatedRun.Seconds(), actual.Seconds(), e.Seconds())
		if seen[cmd] {
			sumErr += abs(e).Seconds()
			sumRel += abs(e).Seconds() / actual.Seconds()
			n++
			// Runs stretch under load, so only the floor is certain: a
			// median of runs of `sleep S` is at least S.
			if floor := map[string]time.Duration{"sleep 0.2": 200 * time.Millisecond, "sleep 0.4": 400 * time.Millisecond}[cmd]; info.EstimatedRun < floor {
				t.Errorf("%s: estimate %s below its floor", cmd, info.EstimatedRun)
			}
		}
		seen[cmd] = true
	}
	t.Logf("run estimates with history: mean absolute error %.3fs (%.1f%%) over %d jobs", sumErr/float64(n), 100*sumRel/float64(n), n)

	// A batch: the first holds the card while the rest queue behind it.
	gate, release := b.gate()
	g := b.submit(0, gate)
	b.waitOutput(g.ID, "started")
	var batch []JobInfo
	for i := range 6 {
		spec := JobSpec{Card: 0, Cmd: cmds[i%2], Cwd: b.work, Repeat: 1 + i%2}
		info, err := b.s.Submit(spec)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, info)
	}
	released := time.Now()
	release()
	b.waitDone(g.ID)
	var waitErr float64
	for _, info := range batch {
		done := b.waitDone(info.ID)
		// The gate's own estimate (the card's median) is not what is being
		// measured: count waits from the moment it was released.
		gateLeft := batch[0].EstimatedWait
		est := info.EstimatedWait - gateLeft
		actual := done.StartedAt.Sub(released)
		t.Logf("batch %-9s ×%d position %d estimated wait after the gate %6.3fs actual %6.3fs error %+6.3fs",
			info.Cmd, info.Repeat, info.Position, est.Seconds(), actual.Seconds(), (est - actual).Seconds())
		waitErr += abs(est - actual).Seconds()
	}
	t.Logf("queued waits: mean absolute error %.3fs over %d jobs", waitErr/float64(len(batch)), len(batch))
}

func abs(d time.Duration) time.Duration { return max(d, -d) }

// An active hold with an expiry is expected to last until it expires,
// not a job's median: the jobs behind an operator's two-hour maintenance
// hold wait about two hours. It is never overdue; a hold without an
// expiry is still guessed at the card's median.
func TestEstimates_ActiveHoldLastsUntilItsExpiry(t *testing.T) {
	t.Parallel()
	clk := newClock()
	b := setup(t, func(o *Options) { o.Now = clk.Now })
	h, err := b.s.Hold(HoldSpec{Cards: []int{0}, Reason: "firmware flash", Expires: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	b.wait(h.ID, "active", func(w Watch) bool { return w.Info.State == store.StateRunning })
	clk.Advance(30 * time.Minute)
	one := b.submit(0, "true")
	if one.EstimatedWait != 90*time.Minute {
		t.Errorf("a job behind the hold waits %s, want 1h30m", one.EstimatedWait)
	}
	if info, _ := b.s.Job(one.ID); info.EstimatedWait != 90*time.Minute {
		t.Errorf("the job's wait looked up: %s, want 1h30m", info.EstimatedWait)
	}
	clk.Advance(89 * time.Minute) // past the hold's start + median many times over, a minute before its expiry
	c := b.s.Status().Cards[0]
	if c.Current == nil || c.Current.ID != h.ID || c.Current.EstimatedWait != time.Minute || c.Current.EstimatedRun != 2*time.Hour || !c.Current.EstimateKnown || c.Current.Overdue != 0 {
		t.Fatalf("the hold in card 0's status: %+v", c.Current)
	}
	if info, _ := b.s.Job(h.ID); info.EstimatedRun != 2*time.Hour || !info.EstimateKnown || info.Overdue != 0 {
		t.Errorf("the hold looked up: run %s (known %v) overdue %s", info.EstimatedRun, info.EstimateKnown, info.Overdue)
	}
	if _, err := b.s.Release(h.ID, "done"); err != nil {
		t.Fatal(err)
	}
	b.waitDone(one.ID)
	open, err := b.s.Hold(HoldSpec{Cards: []int{1}, Reason: "no end"})
	if err != nil {
		t.Fatal(err)
	}
	b.wait(open.ID, "active", func(w Watch) bool { return w.Info.State == store.StateRunning })
	clk.Advance(10 * time.Second)
	two := b.submit(1, "true")
	clk.Advance(time.Hour)
	if two.EstimatedWait != DefaultRunEstimate-10*time.Second {
		t.Errorf("a job behind a hold without expiry waits %s, want the median's rest", two.EstimatedWait)
	}
	if info, _ := b.s.Job(open.ID); info.Overdue != 0 {
		t.Errorf("a hold without expiry is overdue by %s", info.Overdue)
	}
	if _, err := b.s.Release(open.ID, "done"); err != nil {
		t.Fatal(err)
	}
	b.waitDone(two.ID)
}
