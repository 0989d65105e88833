package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/store"
)

// submitOn queues cmd on several cards at once.
func (b *bundle) submitOn(cards []int, spec, cmd string) JobInfo {
	b.t.Helper()
	info, err := b.s.Submit(JobSpec{Cards: cards, DeviceSpec: spec, Cmd: cmd, Cwd: b.work})
	if err != nil {
		b.t.Fatal(err)
	}
	return info
}

// A job of cards 0 and 1 starts when both are free, on both at once; it
// sees the cards as given; a card whose head it is waits for it, and a
// job queued behind it on that card does not jump it.
func TestSpan_StartsWhenEveryCardIsFree(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.Devices = []int{0, 1, 2} })
	gate, release := b.gate()
	busy := b.submit(1, gate)
	b.waitOutput(busy.ID, "started")
	span := b.submitOn([]int{0, 1}, "0-1", `echo "cards=$TT_QUEUE_DEVICE"`)
	behind := b.submit(0, "echo behind")
	other := b.submit(2, "echo other")
	b.waitDone(other.ID) // card 2 runs independently

	st := b.s.Status()
	if c0 := st.Cards[0]; c0.Current != nil || !strings.Contains(c0.Worker, "waiting: job "+span.ID[:8]) || !strings.Contains(c0.Worker, "card 1") {
		t.Errorf("card 0 while the spanning job waits for card 1: current %v, worker %q", c0.Current, c0.Worker)
	}
	// The idle time the wait costs card 0 shows: since when it waits.
	if c0 := st.Cards[0]; c0.WaitingSince.IsZero() || c0.WaitingSince.Before(span.SubmittedAt) || c0.WaitingSince.After(time.Now()) {
		t.Errorf("card 0 waits since %v; want a time after the spanning job's submission %v", c0.WaitingSince, span.SubmittedAt)
	}
	if c1 := st.Cards[1]; !c1.WaitingSince.IsZero() {
		t.Errorf("card 1 runs a job, yet waits since %v", c1.WaitingSince)
	}
	if j, _ := b.s.Job(behind.ID); j.State != store.StateQueued || j.Position != 2 {
		t.Errorf("the job behind on card 0: %s at %d; it must not jump the spanning job", j.State, j.Position)
	}
	if j, _ := b.s.Job(span.ID); j.Position != 1 {
		t.Errorf("the spanning job's position %d, want 1 (next on both)", j.Position)
	}
	release()
	done := b.waitDone(span.ID)
	if out := output(t, b, span.ID); out != "cards=0-1\n" || *done.ExitCode != 0 {
		t.Errorf("the spanning job: exit %d, output %q", *done.ExitCode, out)
	}
	if c0 := b.s.Status().Cards[0]; !c0.WaitingSince.IsZero() {
		t.Errorf("card 0 still waits since %v once the spanning job ran", c0.WaitingSince)
	}
	first := b.waitDone(behind.ID)
	if !first.StartedAt.After(done.FinishedAt) && !first.StartedAt.Equal(done.FinishedAt) {
		t.Errorf("the job behind started at %v, before the spanning job ended at %v", first.StartedAt, done.FinishedAt)
	}
}

// While a job of two cards runs, both cards show it and neither starts
// anything else; killing it frees both.
func TestSpan_RunsOnEveryCardAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	gate, release := b.gate()
	defer release()
	span := b.submitOn([]int{0, 1}, "0,1", gate)
	b.waitOutput(span.ID, "started")
	one := b.submit(1, "echo one")
	st := b.s.Status()
	for _, c := range st.Cards {
		if c.Current == nil || c.Current.ID != span.ID {
			t.Errorf("card %d runs %v, want the spanning job", c.ID, c.Current)
		}
	}
	if _, err := b.s.Kill(span.ID); err != nil {
		t.Fatal(err)
	}
	if j := b.waitDone(span.ID); j.Outcome != store.OutcomeKilled {
		t.Errorf("killed spanning job: %s", j.Outcome)
	}
	b.waitDone(one.ID)
}

// A queued job of two cards killed leaves both queues; a card that dies
// fails it, on the other card's queue too.
func TestSpan_KillAndDeadCard(t *testing.T) {
	t.Parallel()
	c := newControls(t)
	b := setup(t, func(o *Options) { o.Controls = c.options() })
	gate, release := b.gate()
	busy := b.submit(0, gate)
	b.waitOutput(busy.ID, "started")
	killed := b.submitOn([]int{0, 1}, "0,1", "echo never")
	if _, err := b.s.Kill(killed.ID); err != nil {
		t.Fatal(err)
	}
	st := b.s.Status()
	if len(st.Cards[0].Queue) != 0 || len(st.Cards[1].Queue) != 0 {
		t.Errorf("a killed spanning job is still queued: %v / %v", st.Cards[0].Queue, st.Cards[1].Queue)
	}
	doomed := b.submitOn([]int{0, 1}, "0,1", "echo never")
	c.flag("fail-health", true)
	card := 1
	if _, err := b.s.Reset(ResetRequest{Card: &card}); err != nil {
		t.Fatal(err)
	}
	if j := b.waitDone(doomed.ID); j.Outcome != store.OutcomeCardDead {
		t.Errorf("a spanning job of a card that died: %s %q", j.Outcome, j.Error)
	}
	if q := b.s.Status().Cards[0].Queue; len(q) != 0 {
		t.Errorf("the failed spanning job is still in card 0's queue: %v", q)
	}
	if _, err := b.s.Submit(JobSpec{Cards: []int{0, 1}, Cmd: "true", Cwd: b.work}); !errors.Is(err, ErrCardDead) {
		t.Errorf("a submission naming a dead card: %v", err)
	}
	release()
}

// A reset of one of its cards interrupts a running job of two cards; a
// reset for the job resets both of its cards.
func TestSpan_Resets(t *testing.T) {
	t.Parallel()
	c := newControls(t)
	b := setup(t, func(o *Options) { o.Controls = c.options() })
	gate, release := b.gate()
	defer release()
	span := b.submitOn([]int{0, 1}, "0,1", gate)
	b.waitOutput(span.ID, "started")
	card := 1
	outs, err := b.s.Reset(ResetRequest{Card: &card})
	if err != nil || outs[0].Interrupted != span.ID {
		t.Fatalf("reset of card 1: %+v, %v", outs, err)
	}
	if j := b.waitDone(span.ID); j.Outcome != store.OutcomeInterrupted || !strings.Contains(j.Error, "reset of card") {
		t.Errorf("the spanning job after a reset of one of its cards: %s %q", j.Outcome, j.Error)
	}
	b.waitDone(outs[0].JobID)
	// Card 1 was reset since the job ran, card 0 was not: a reset for the
	// job resets card 0 and skips card 1.
	outs, err = b.s.Reset(ResetRequest{JobID: span.ID})
	if err != nil || len(outs) != 2 {
		t.Fatalf("reset for the job: %+v, %v", outs, err)
	}
	for _, o := range outs {
		if skip := o.Card == 1; o.Skipped != skip {
			t.Errorf("card %d: skipped %v (%s)", o.Card, o.Skipped, o.Reason)
		}
	}
}

// A queued job of two cards survives a restart in both queues and runs
// once after it.
func TestSpan_SurvivesRestart(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	gate, release := b.gate()
	defer release()
	busy := b.submit(1, gate)
	b.waitOutput(busy.ID, "started")
	span := b.submitOn([]int{0, 1}, "0,1", "echo $TT_QUEUE_DEVICE")
	b.restart() // the gate job is interrupted; the spanning job is still queued
	j := b.waitDone(span.ID)
	if j.Outcome != store.OutcomeSuccess || output(t, b, span.ID) != "0,1\n" {
		t.Errorf("after a restart: %s %q", j.Outcome, output(t, b, span.ID))
	}
}

// A hold takes its cards in their turn and keeps them until released;
// jobs behind it wait; a reset waits for it unless forced.
func TestHold_HoldsUntilReleased(t *testing.T) {
	t.Parallel()
	c := newControls(t)
	b := setup(t, func(o *Options) { o.Controls = c.options() })
	h, err := b.s.Hold(HoldSpec{Cards: []int{0, 1}, DeviceSpec: "0,1", Reason: "slurm job 4242", SlurmJobID: "4242"})
	if err != nil {
		t.Fatal(err)
	}
	b.wait(h.ID, "active", func(w Watch) bool { return w.Info.State == store.StateRunning })
	behind := b.submit(0, "echo behind")
	card := 0
	outs, err := b.s.Reset(ResetRequest{Card: &card})
	if err != nil || outs[0].WaitsFor != h.ID {
		t.Fatalf("a reset of a held card: %+v, %v; want it to wait for the hold", outs, err)
	}
	if j, _ := b.s.Job(behind.ID); j.State != store.StateQueued {
		t.Errorf("a job behind a hold: %s", j.State)
	}
	if _, err := b.s.Release(h.ID, "released by the test"); err != nil {
		t.Fatal(err)
	}
	if j := b.waitDone(h.ID); j.Outcome != store.OutcomeReleased || j.Error != "released by the test" || *j.ExitCode != 0 {
		t.Errorf("released hold: %s %q", j.Outcome, j.Error)
	}
	b.waitDone(outs[0].JobID)
	b.waitDone(behind.ID)
	if _, err := b.s.Release(h.ID, ""); !errors.Is(err, ErrFinished) {
		t.Errorf("releasing it again: %v", err)
	}
	if _, err := b.s.Release(behind.ID, ""); !errors.Is(err, ErrNotAHold) {
		t.Errorf("releasing a job: %v", err)
	}

	// Forced, a reset ends the hold.
	h2, _ := b.s.Hold(HoldSpec{Cards: []int{1}, Reason: "maintenance"})
	b.wait(h2.ID, "active", func(w Watch) bool { return w.Info.State == store.StateRunning })
	card = 1
	outs, err = b.s.Reset(ResetRequest{Card: &card, Force: true})
	if err != nil || outs[0].Interrupted != h2.ID {
		t.Fatalf("forced reset of a held card: %+v, %v", outs, err)
	}
	if j := b.waitDone(h2.ID); j.Outcome != store.OutcomeInterrupted {
		t.Errorf("hold after a forced reset: %s %q", j.Outcome, j.Error)
	}
}

// A hold expires by itself; a queued hold released leaves its queue; an
// active hold holds its cards again after a restart; a hold whose Slurm
// job is gone ends.
func TestHold_ExpiryRestartAndSlurm(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	gone := map[string]bool{}
	b := setup(t, func(o *Options) {
		o.SlurmCheckInterval = 20 * time.Millisecond
		o.SlurmJobGone = func(_ context.Context, id string) (bool, string, error) {
			mu.Lock()
			defer mu.Unlock()
			return gone[id], "no such job", nil
		}
	})
	exp, _ := b.s.Hold(HoldSpec{Cards: []int{0}, Expires: 200 * time.Millisecond})
	if j := b.waitDone(exp.ID); j.Outcome != store.OutcomeExpired {
		t.Errorf("expiring hold: %s %q", j.Outcome, j.Error)
	}
	active, _ := b.s.Hold(HoldSpec{Cards: []int{1}, Reason: "kept", SlurmJobID: "77"})
	b.wait(active.ID, "active", func(w Watch) bool { return w.Info.State == store.StateRunning })
	queued, _ := b.s.Hold(HoldSpec{Cards: []int{1}, Reason: "behind"})
	if _, err := b.s.Release(queued.ID, "not needed"); err != nil {
		t.Fatal(err)
	}
	if j, _ := b.s.Job(queued.ID); j.Outcome != store.OutcomeReleased {
		t.Errorf("a released queued hold: %s", j.Outcome)
	}
	b.restart()
	j := b.wait(active.ID, "active again", func(w Watch) bool { return w.Info.State == store.StateRunning }).Info
	if st := b.s.Status(); st.Cards[1].Current == nil || st.Cards[1].Current.ID != active.ID {
		t.Errorf("after a restart card 1 runs %v, want the hold", st.Cards[1].Current)
	}
	job := b.submit(1, "echo after")
	// A hold still queued whose Slurm job is gone (cancelled while its
	// Prolog waited) leaves the queue then, not once it has taken the card.
	behind, _ := b.s.Hold(HoldSpec{Cards: []int{1}, SlurmJobID: "88"})
	mu.Lock()
	gone["88"] = true
	mu.Unlock()
	if j := b.waitDone(behind.ID); j.Outcome != store.OutcomeReleased || !j.StartedAt.IsZero() || !strings.Contains(j.Error, "Slurm job 88 is gone") {
		t.Errorf("a queued hold whose Slurm job is gone: %s started %v %q", j.Outcome, j.StartedAt, j.Error)
	}
	if st := b.s.Status(); st.Cards[1].Current == nil || st.Cards[1].Current.ID != active.ID {
		t.Errorf("card 1 runs %v, want the hold of Slurm job 77", st.Cards[1].Current)
	}
	mu.Lock()
	gone["77"] = true
	mu.Unlock()
	if j := b.waitDone(active.ID); j.Outcome != store.OutcomeReleased || !strings.Contains(j.Error, "Slurm job 77 is gone") {
		t.Errorf("a hold whose Slurm job is gone: %s %q", j.Outcome, j.Error)
	}
	_ = j
	b.waitDone(job.ID)
}

// TestSpan_RandomMix drives a random mix of jobs of one and several cards,
// holds, kills, resets (some of which fail, killing the card, until a
// later reset revives it) and restarts, and checks the rules: on each card
// jobs start in submission order; a job of several cards starts only when
// all of them are free, so nothing else (job or hold) runs on any of its
// cards while it runs; nothing runs twice; every job that succeeded ran;
// and everything ends (no deadlock).
func TestSpan_RandomMix(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	c := newControls(t)
	b := setup(t, func(o *Options) {
		o.Devices = []int{0, 1, 2, 3}
		o.Controls = c.options()
		o.KillGrace = 100 * time.Millisecond
	})
	ran := filepath.Join(b.work, "ran.log")
	var ids []string
	spans := map[string][]int{}
	var holds []string
	deaths := 0
	for round := range 8 {
		for range 12 {
			var cards []int
			for _, card := range rng.Perm(4)[:1+rng.IntN(3)] {
				cards = append(cards, card)
			}
			slices.Sort(cards)
			switch r := rng.IntN(10); {
			case r == 0:
				h, err := b.s.Hold(HoldSpec{Cards: cards, DeviceSpec: fmt.Sprint(cards), Reason: "mix", Expires: time.Duration(50+rng.IntN(200)) * time.Millisecond})
				if err == nil {
					holds = append(holds, h.ID)
					spans[h.ID] = cards
				}
			default:
				cmd := fmt.Sprintf(`echo "$TT_QUEUE_JOB_ID start $(date +%%s%%N)" >> %[1]s; sleep 0.0%[2]d; echo "$TT_QUEUE_JOB_ID end $(date +%%s%%N)" >> %[1]s`, ran, rng.IntN(5))
				info, err := b.s.Submit(JobSpec{Cards: cards, DeviceSpec: fmt.Sprint(cards), Cmd: cmd, Cwd: b.work})
				if err != nil {
					continue // a card may be resetting or dead for a moment: refused is fine
				}
				ids = append(ids, info.ID)
				spans[info.ID] = cards
			}
		}
		op := rng.IntN(4) // 3, nothing; a card dies in round 5 only
		if round == 5 {
			op = 4 // a card dies and comes back
		}
		switch op {
		case 0:
			if len(ids) > 0 {
				b.s.Kill(ids[rng.IntN(len(ids))])
			}
		case 1:
			card := rng.IntN(4)
			b.s.Reset(ResetRequest{Card: &card})
		case 2:
			if len(holds) > 0 {
				b.s.Release(holds[rng.IntN(len(holds))], "mix")
			}
		case 4:
			// A reset whose health check fails kills its card: its queue
			// fails, and jobs spanning it are refused or fail, until a
			// later reset (the health check passing again) revives it.
			card := rng.IntN(4)
			c.flag("fail-health", true)
			r, err := b.s.Reset(ResetRequest{Card: &card})
			if err == nil && len(r) > 0 && r[0].JobID != "" {
				b.waitDone(r[0].JobID)
				deaths++
			}
			c.flag("fail-health", false)
		}
		if round == 3 {
			b.restart()
		}
	}
	// Revive every card, so everything still queued runs.
	for card := range 4 {
		if r, err := b.s.Reset(ResetRequest{Card: &card}); err == nil && len(r) > 0 && r[0].JobID != "" {
			b.waitDone(r[0].JobID)
		}
	}
	infos := map[string]JobInfo{}
	for _, id := range append(append([]string(nil), ids...), holds...) {
		infos[id] = b.waitDone(id)
	}
	data, _ := os.ReadFile(ran)
	runs := map[string]int{}
	starts := map[string]int64{}
	last := map[int]uint64{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		id := f[0]
		if f[1] != "start" {
			continue
		}
		runs[id]++
		if runs[id] > 1 {
			t.Errorf("job %s ran twice", id)
		}
		starts[id], _ = strconv.ParseInt(f[2], 10, 64)
		for _, card := range spans[id] {
			if infos[id].Seq < last[card] {
				t.Errorf("card %d started job %s (seq %d) after seq %d: not FIFO", card, id, infos[id].Seq, last[card])
			}
			last[card] = infos[id].Seq
		}
	}
	// What ran, from its start (the job's own first line, a hold's record)
	// to its record's end, which comes after its processes are gone.
	type span struct {
		id         string
		start, end int64
	}
	perCard := map[int][]span{}
	for id, info := range infos {
		start, ok := starts[id]
		if info.Kind == store.KindHold {
			start, ok = info.StartedAt.UnixNano(), !info.StartedAt.IsZero()
		}
		if info.Outcome == store.OutcomeSuccess && info.Kind == store.KindJob && !ok {
			t.Errorf("job %s succeeded without running", id)
		}
		if !ok {
			continue
		}
		for _, card := range spans[id] {
			perCard[card] = append(perCard[card], span{id, start, info.FinishedAt.UnixNano()})
		}
	}
	for card, list := range perCard {
		slices.SortFunc(list, func(x, y span) int { return cmp.Compare(x.start, y.start) })
		for i := 1; i < len(list); i++ {
			if prev, cur := list[i-1], list[i]; cur.start < prev.end {
				t.Errorf("card %d: %s (cards %v) started %v before %s (cards %v) ended: two at once on a card",
					card, cur.id[:8], spans[cur.id], time.Duration(prev.end-cur.start), prev.id[:8], spans[prev.id])
			}
		}
	}
	t.Logf("%d jobs (%d ran), %d holds, %d cards killed by a failed reset", len(ids), len(runs), len(holds), deaths)
}
