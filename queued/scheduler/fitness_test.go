package scheduler

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/queued/store"
)

// fakeCards is a host's view of its cards as a test drives it: a
// directory of device nodes and a sysfs tree with each card's class
// entry and tt_heartbeat, which moves (every 10 ms, from a process of its
// own: kmdtest.Heartbeats) only while the card beats.
type fakeCards struct {
	t          testing.TB
	dev, sysfs string
	beats      *kmdtest.Heartbeats
}

func newFakeCards(t testing.TB, cards ...int) *fakeCards {
	t.Helper()
	root := t.TempDir()
	f := &fakeCards{t: t, dev: filepath.Join(root, "dev"), sysfs: filepath.Join(root, "sys")}
	if err := os.MkdirAll(f.dev, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[int]string{}
	for _, n := range cards {
		if err := os.MkdirAll(f.entry(n), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(f.dev, strconv.Itoa(n)), nil, 0o666); err != nil {
			t.Fatal(err)
		}
		files[n] = filepath.Join(f.entry(n), "tt_heartbeat")
	}
	f.beats = kmdtest.StartHeartbeats(t, 10*time.Millisecond, files)
	return f
}

func (f *fakeCards) entry(n int) string {
	return filepath.Join(f.sysfs, "class", "tenstorrent", "tenstorrent!"+strconv.Itoa(n))
}

// beat starts or stops card n's heartbeat; it returns once the writer has
// seen it.
func (f *fakeCards) beat(n int, on bool) { f.beats.Stall(n, !on) }

// hold runs fn while no heartbeat moves.
func (f *fakeCards) hold(fn func()) { f.beats.Pause(fn) }

// options points the scheduler at the fake cards, sampling every 50 ms.
func (f *fakeCards) options(o *Options) {
	o.DevDir, o.SysfsPath, o.GateInterval = f.dev, f.sysfs, 50*time.Millisecond
}

// cardStatus is card n in a status snapshot.
func cardStatus(b *bundle, n int) CardStatus {
	for _, c := range b.s.Status().Cards {
		if c.ID == n {
			return c
		}
	}
	b.t.Fatalf("no card %d in status", n)
	return CardStatus{}
}

// waitCard polls status until card n satisfies cond.
func waitCard(b *bundle, n int, what string, cond func(CardStatus) bool) CardStatus {
	b.t.Helper()
	var c CardStatus
	poll(b.t, fmt.Sprintf("card %d %s", n, what), func() bool { c = cardStatus(b, n); return cond(c) })
	return c
}

// A card whose heartbeat stops holds its queued job (queued, not failed)
// and shows unfit with the reason, while the other card runs on; the
// heartbeat resuming lets the job start.
func TestFitness_StalledHeartbeatHoldsTheJobUntilItMoves(t *testing.T) {
	t.Parallel()
	cards := newFakeCards(t, 0, 1)
	b := setup(t, cards.options)
	cards.beat(1, false)
	c1 := waitCard(b, 1, "unfit", func(c CardStatus) bool { return c.State == Unfit })
	if !strings.HasPrefix(c1.Reason, "heartbeat stalled since ") || c1.UnfitSince.IsZero() {
		t.Fatalf("card 1 unfit with reason %q since %v", c1.Reason, c1.UnfitSince)
	}
	held := b.submit(1, "echo ran")
	other := b.submit(0, "echo other ran")
	if got := b.waitDone(other.ID); got.Outcome != store.OutcomeSuccess {
		t.Fatalf("the fit card's job: %s %q", got.Outcome, got.Error)
	}
	c1 = waitCard(b, 1, "paused by the gate", func(c CardStatus) bool { return strings.HasPrefix(c.Worker, "paused: card unfit: heartbeat stalled") })
	if j, _ := b.s.Job(held.ID); j.State != store.StateQueued || len(c1.Queue) != 1 {
		t.Fatalf("the unfit card's job is %s, its queue %d long; want it queued", j.State, len(c1.Queue))
	}
	cards.beat(1, true)
	if got := b.waitDone(held.ID); got.Outcome != store.OutcomeSuccess {
		t.Fatalf("after the heartbeat resumed: %s %q", got.Outcome, got.Error)
	}
	if c := cardStatus(b, 1); c.State != Healthy || c.Reason != "" {
		t.Errorf("card 1 after the heartbeat resumed: %s %q", c.State, c.Reason)
	}
}

// A card whose device node or sysfs entry disappears is unfit; one whose
// driver has no heartbeat attribute is not judged on it.
func TestFitness_MissingNodeOrEntryIsUnfitAbsentHeartbeatIsNot(t *testing.T) {
	t.Parallel()
	cards := newFakeCards(t, 0, 1)
	cards.beat(0, false)
	if err := os.Remove(filepath.Join(cards.entry(0), "tt_heartbeat")); err != nil {
		t.Fatal(err)
	}
	b := setup(t, cards.options)
	if got := b.waitDone(b.submit(0, "true").ID); got.Outcome != store.OutcomeSuccess {
		t.Fatalf("a card without tt_heartbeat: %s %q", got.Outcome, got.Error)
	}
	if err := os.Remove(filepath.Join(cards.dev, "1")); err != nil {
		t.Fatal(err)
	}
	waitCard(b, 1, "unfit for its node", func(c CardStatus) bool {
		return c.State == Unfit && c.Reason == "device node "+filepath.Join(cards.dev, "1")+" is missing"
	})
	if err := os.WriteFile(filepath.Join(cards.dev, "1"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	waitCard(b, 1, "fit again", func(c CardStatus) bool { return c.State == Healthy })
	var err error
	cards.hold(func() { err = os.RemoveAll(cards.entry(1)) })
	if err != nil {
		t.Fatal(err)
	}
	waitCard(b, 1, "unfit for its sysfs entry", func(c CardStatus) bool {
		return c.State == Unfit && strings.HasPrefix(c.Reason, "no sysfs entry tenstorrent!1 under ")
	})
}

// probeScript is a gate command that records each card it probes and
// fails for a card while a fail-<card> file exists.
func probeScript(t *testing.T) (cmd, dir string) {
	t.Helper()
	dir = t.TempDir()
	script := fmt.Sprintf(`#!/bin/sh
echo "$1" >> %[1]q/probed
if [ -e %[1]q/fail-$1 ]; then echo "card $1: ethernet link 3 down"; exit 3; fi
echo "card $1 fine"
`, dir)
	if err := os.WriteFile(filepath.Join(dir, "probe.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "probe.sh") + " {device}", dir
}

// probed lists the cards the probe ran on, in order.
func probed(dir string) []string {
	b, _ := os.ReadFile(filepath.Join(dir, "probed"))
	return strings.Fields(string(b))
}

// A gate command that fails holds its card (its job stays queued, the
// reason is its exit and last line); after a job that ended badly the
// probe runs again before the card's next job.
func TestFitness_FailingGateCommandHoldsTheCard(t *testing.T) {
	t.Parallel()
	cards := newFakeCards(t, 0, 1)
	probe, dir := probeScript(t)
	if err := os.WriteFile(filepath.Join(dir, "fail-1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b := setup(t, func(o *Options) { cards.options(o); o.GateCmd = probe })
	c1 := waitCard(b, 1, "unfit by its probe", func(c CardStatus) bool { return c.State == Unfit })
	if c1.Reason != "gate command exited 3: card 1: ethernet link 3 down" {
		t.Fatalf("card 1's reason: %q", c1.Reason)
	}
	held := b.submit(1, "echo ran")
	if got := b.waitDone(b.submit(0, "true").ID); got.Outcome != store.OutcomeSuccess {
		t.Fatalf("the fit card's job: %s %q", got.Outcome, got.Error)
	}
	if j, _ := b.s.Job(held.ID); j.State != store.StateQueued {
		t.Fatalf("the job of the card failing its probe is %s; want queued", j.State)
	}
	if err := os.Remove(filepath.Join(dir, "fail-1")); err != nil {
		t.Fatal(err)
	}
	// The failed probe runs again (every six intervals while a job waits).
	if got := b.waitDone(held.ID); got.Outcome != store.OutcomeSuccess {
		t.Fatalf("after the probe passed: %s %q", got.Outcome, got.Error)
	}
	// A job that times out makes the probe due before the next job.
	before := len(probed(dir))
	info, err := b.s.Submit(JobSpec{Card: 0, Cmd: "sleep 30", Cwd: b.work, Timeout: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.waitDone(info.ID); got.Outcome != store.OutcomeTimeout {
		t.Fatalf("want a timeout, got %s", got.Outcome)
	}
	next := b.submit(0, "true")
	b.waitDone(next.ID)
	after := probed(dir)
	if len(after) <= before || after[len(after)-1] != "0" {
		t.Fatalf("probes before the timeout %d, after: %v; want card 0 probed again", before, after)
	}
}

// After a restart of queued every card passes the gate before its first
// job: the probe runs on each, and a card whose heartbeat stalled while
// queued was down holds the job queued before the restart.
func TestFitness_RestartGatesEveryCard(t *testing.T) {
	t.Parallel()
	cards := newFakeCards(t, 0, 1)
	probe, dir := probeScript(t)
	b := setup(t, func(o *Options) { cards.options(o); o.GateCmd = probe })
	poll(t, "the start probe of both cards", func() bool { return len(probed(dir)) >= 2 })
	b.s.Stop()
	if err := os.Remove(filepath.Join(dir, "probed")); err != nil {
		t.Fatal(err)
	}
	cards.beat(1, false)
	b.start()
	waitCard(b, 1, "unfit after the restart", func(c CardStatus) bool { return c.State == Unfit })
	held := b.submit(1, "echo ran")
	poll(t, "the probe of every card after the restart", func() bool {
		got := probed(dir)
		return len(got) >= 2 && strings.Contains(strings.Join(got, " "), "0") && strings.Contains(strings.Join(got, " "), "1")
	})
	if j, _ := b.s.Job(held.ID); j.State != store.StateQueued {
		t.Fatalf("job on the stalled card after a restart is %s; want queued", j.State)
	}
	cards.beat(1, true)
	b.waitDone(held.ID)
}

// A card that turns unfit gets its reset from queued itself, recorded as
// queued's; a reset whose command exits 0 but leaves the heartbeat
// stalled (tt-smi's lie) is not recovery: with no other rung the ladder
// is exhausted and the card dead, and queued does not reset it again.
func TestFitness_UnfitCardIsResetByQueued(t *testing.T) {
	t.Parallel()
	cards := newFakeCards(t, 0, 1)
	ctl := newControls(t)
	b := setup(t, func(o *Options) {
		cards.options(o)
		o.Controls = ctl.options()
		o.RecoveryCooldown = time.Hour
	})
	cards.beat(1, false)
	poll(t, "queued's reset of card 1", func() bool { return len(ctl.calls()) >= 2 })
	ctl.wantCalls("reset 1 --no_reinit", "health 1")
	// The reset exited 0 and left the heartbeat stalled: not recovered,
	// and with no further rung the card is dead (see ladder_test.go).
	c1 := waitCard(b, 1, "dead after a reset that left its heartbeat stalled", func(c CardStatus) bool {
		return c.State == Dead && c.LastReset != nil && c.Reset == nil
	})
	if !strings.Contains(c1.Reason, "gate: heartbeat stalled") {
		t.Fatalf("reason %q", c1.Reason)
	}
	rec, err := b.s.Record(c1.LastReset.JobID)
	if err != nil || rec.Owner != AutoRecoveryOwner {
		t.Fatalf("the automatic reset's record: owner %q, %v", rec.Owner, err)
	}
	time.Sleep(300 * time.Millisecond) // six sample intervals: a dead card is not reset by queued again
	if got := ctl.calls(); len(got) != 2 {
		t.Fatalf("calls after the card died: %v", got)
	}
	cards.beat(1, true)
	b.waitDone(b.reset(ResetRequest{Card: cardPtr(1)})[0].JobID)
	waitCard(b, 1, "healthy", func(c CardStatus) bool { return c.State == Healthy })
}

// A job of several cards passes the gate on every one of them: with one
// unfit it waits, saying which card and why, and starts once that card's
// heartbeat moves.
func TestFitness_JobOfSeveralCardsWaitsForAnUnfitOne(t *testing.T) {
	t.Parallel()
	cards := newFakeCards(t, 0, 1)
	b := setup(t, cards.options)
	cards.beat(1, false)
	waitCard(b, 1, "unfit", func(c CardStatus) bool { return c.State == Unfit })
	info, err := b.s.Submit(JobSpec{Cards: []int{0, 1}, Cmd: "echo both", Cwd: b.work})
	if err != nil {
		t.Fatal(err)
	}
	waitCard(b, 0, "waiting for the unfit card", func(c CardStatus) bool {
		return strings.HasPrefix(c.Worker, "waiting: ") && strings.Contains(c.Worker, "card 1 is unfit (heartbeat stalled since ")
	})
	if j, _ := b.s.Job(info.ID); j.State != store.StateQueued {
		t.Fatalf("the job of both cards is %s; want queued", j.State)
	}
	cards.beat(1, true)
	if got := b.waitDone(info.ID); got.Outcome != store.OutcomeSuccess {
		t.Fatalf("after card 1 turned fit: %s %q", got.Outcome, got.Error)
	}
}

// A gate command that runs past TT_DEVICE_GATE_TIMEOUT is ended and
// holds its card, saying so.
func TestFitness_GateCommandPastItsTimeoutHoldsTheCard(t *testing.T) {
	t.Parallel()
	cards := newFakeCards(t, 0)
	b := setup(t, func(o *Options) {
		cards.options(o)
		o.Devices = []int{0}
		o.GateCmd, o.GateTimeout = "exec sleep 30 # {device}", 300*time.Millisecond
	})
	c := waitCard(b, 0, "unfit by its probe's timeout", func(c CardStatus) bool { return c.State == Unfit })
	if c.Reason != "gate command timed out after 300ms" {
		t.Fatalf("reason %q", c.Reason)
	}
}

// The heartbeat is stalled only when it stood still between two reads at
// least heartbeatGap apart, counted from the end of the first read: a
// reader that took its clock and then waited (preempted on a busy host)
// before the read itself must not take that wait for the card's silence.
// Here the first read's clock is 600 ms older than its read, and a second
// read follows at once.
func TestFitness_AReadThatWaitedAfterItsClockIsNoStall(t *testing.T) {
	t.Parallel()
	cards := newFakeCards(t, 0, 1)
	cards.beat(1, false)
	b := setup(t, cards.options)
	s := b.s.core.fit.samplers[1]
	s.mu.Lock()
	defer s.mu.Unlock()
	s.judged, s.hbOK = false, false
	s.readLocked(time.Now().Add(-600 * time.Millisecond))
	s.readLocked(time.Now())
	if s.verdict != "" {
		t.Fatalf("two reads microseconds apart judged %q", s.verdict)
	}
	// A real stall still is one: the next read, heartbeatGap after the
	// last, finds it.
	s.mu.Unlock()
	time.Sleep(heartbeatGap + 50*time.Millisecond)
	s.mu.Lock()
	s.readLocked(time.Now())
	if !strings.HasPrefix(s.verdict, "heartbeat stalled since ") {
		t.Fatalf("a heartbeat still for %v: verdict %q", heartbeatGap+50*time.Millisecond, s.verdict)
	}
}
