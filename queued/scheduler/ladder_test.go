package scheduler

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/ttkit/ttkit/queued/store"
)

// The recovery ladder (docs/fitness.md, "The recovery ladder"): each
// rung is verified by the health check and the gate; a rung's exit status
// alone never counts as recovered.

// reviveOn makes card n's heartbeat move again once a control command
// creates path (the rung that brings the card back), and removes path so
// a later rung can be told apart.
func reviveOn(t *testing.T, cards *fakeCards, n int, path string) {
	t.Helper()
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if _, err := os.Stat(path); err == nil {
				os.Remove(path)
				cards.beat(n, true)
			}
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
}

// siteScript writes a site rung: it records its call like the fake
// controls, and touches revive when the file named by its name plus
// "-revives" exists in the controls' directory.
func siteScript(t *testing.T, ctl *controls, name string) string {
	t.Helper()
	path := filepath.Join(ctl.dir, name+".sh")
	script := "#!/bin/sh\necho \"" + name + " $*\" >> " + ctl.dir + "/calls\necho \"" + name + " ran\"\n" +
		"if [ -e " + ctl.dir + "/" + name + "-revives ]; then : > " + ctl.dir + "/revive; fi\nexit 0\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// setupLadder starts a scheduler on fake cards 0 and 1 with the fake
// controls, a deep reset and site rungs named site1, site2...; the
// rung whose "<name>-revives" flag is set brings card 1's heartbeat back.
func setupLadder(t *testing.T, sites int, tweak func(*Options)) (*bundle, *controls, *fakeCards) {
	t.Helper()
	cards := newFakeCards(t, 0, 1)
	ctl := newControls(t)
	// The deep reset of the fake controls revives when deep-revives is
	// set; so does the reset with reset-revives.
	for _, name := range []string{"reset", "deep"} {
		siteScriptInto(t, ctl, name)
	}
	var site []Rung
	for i := 1; i <= sites; i++ {
		site = append(site, Rung{Cmd: siteScript(t, ctl, "site"+string(rune('0'+i))) + " {device}", Timeout: 10 * time.Second})
	}
	reviveOn(t, cards, 1, filepath.Join(ctl.dir, "revive"))
	b := setup(t, func(o *Options) {
		cards.options(o)
		o.Controls = ctl.options()
		o.Controls.DeepReset = ctl.script("deep")
		o.Controls.Site = site
		o.RecoveryCooldown = time.Hour
		if tweak != nil {
			tweak(o)
		}
	})
	return b, ctl, cards
}

// siteScriptInto rewrites one of the fake controls so that it also
// revives card 1 when its "<name>-revives" flag is set.
func siteScriptInto(t *testing.T, ctl *controls, name string) {
	t.Helper()
	path := ctl.script(name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(data), "exit 0\n", "if [ -e "+ctl.dir+"/"+name+"-revives ]; then : > "+ctl.dir+"/revive; fi\nexit 0\n", 1)
	if err := os.WriteFile(path, []byte(s), 0o755); err != nil {
		t.Fatal(err)
	}
}

// A reset that exits 0 and leaves the heartbeat stalled (tt-smi's lie)
// is not recovery: the ladder goes on to the deep reset, which brings the
// card back; the card is healthy, its held job runs, and the reset's log
// has each rung and what its verification saw.
func TestLadder_StalledAfterResetGoesOnToTheDeepReset(t *testing.T) {
	t.Parallel()
	b, ctl, cards := setupLadder(t, 1, nil)
	ctl.flag("deep-revives", true)
	ctl.flag("block-reset", true) // the job below is queued before the ladder can end
	cards.beat(1, false)
	poll(t, "the automatic recovery", func() bool { return len(ctl.calls()) > 0 })
	held := b.submit(1, "echo ran")
	ctl.flag("open-reset", true)
	r := waitCard(b, 1, "recovered", func(c CardStatus) bool { return c.LastReset != nil })
	ctl.wantCalls("reset 1 --no_reinit", "health 1", "deep 1", "health 1")
	if r.LastReset.Result != ResultOK || !strings.Contains(r.LastReset.Detail, "deep reset (rung 2/3)") {
		t.Fatalf("last reset = %+v", r.LastReset)
	}
	if info := b.waitDone(held.ID); info.Outcome != store.OutcomeSuccess {
		t.Fatalf("the held job = %+v", info.Job)
	}
	log := output(t, b, r.LastReset.JobID)
	for _, want := range []string{"== rung 1/3: reset", "== gate on card 1 after the reset: heartbeat stalled since",
		"== rung 2/3: deep reset", "== gate on card 1 after the deep reset: passed", "== card 1 recovered by the deep reset (rung 2/3)"} {
		if !strings.Contains(log, want) {
			t.Fatalf("the reset's log lacks %q:\n%s", want, log)
		}
	}
	if c := b.card(1); c.State != Healthy || c.Rung != "" {
		t.Fatalf("card 1 after the ladder = %+v", c)
	}
}

// A card that comes back only on a site rung (TT_DEVICE_RECOVERY_CMDS)
// climbs the reset and the deep reset first, and the rung currently
// running shows in status.
func TestLadder_CardBackOnlyOnASiteRung(t *testing.T) {
	t.Parallel()
	b, ctl, cards := setupLadder(t, 2, nil)
	ctl.flag("site2-revives", true)
	ctl.flag("block-health", true) // the health check after each rung waits, so status shows the rung
	cards.beat(1, false)
	waitCard(b, 1, "on the reset rung", func(c CardStatus) bool { return c.Rung == "reset (1/4)" })
	ctl.flag("open-health", true)
	r := waitCard(b, 1, "recovered", func(c CardStatus) bool { return c.LastReset != nil })
	ctl.wantCalls("reset 1 --no_reinit", "health 1", "deep 1", "health 1", "site1 1", "health 1", "site2 1", "health 1")
	if r.LastReset.Result != ResultOK || !strings.Contains(r.LastReset.Detail, "site rung 2 (rung 4/4)") {
		t.Fatalf("last reset = %+v", r.LastReset)
	}
	waitCard(b, 1, "healthy", func(c CardStatus) bool { return c.State == Healthy })
}

// A card no rung brings back is dead once the ladder is exhausted: its
// queued jobs fail, the other card runs on, and the reset's record and
// log carry the evidence of each rung.
func TestLadder_CardThatNeverComesBackIsDead(t *testing.T) {
	t.Parallel()
	b, ctl, cards := setupLadder(t, 1, nil)
	ctl.flag("block-reset", true) // the job below is queued before the ladder can end
	cards.beat(1, false)
	poll(t, "the automatic recovery", func() bool { return len(ctl.calls()) > 0 })
	doomed := b.submit(1, "echo never")
	ctl.flag("open-reset", true)
	r := waitCard(b, 1, "dead", func(c CardStatus) bool { return c.State == Dead })
	ctl.wantCalls("reset 1 --no_reinit", "health 1", "deep 1", "health 1", "site1 1", "health 1")
	rec := b.waitDone(r.LastReset.JobID)
	for _, want := range []string{"card 1 is dead: every rung failed: ", "reset exited 0, health check passed, gate: heartbeat stalled since ",
		"; deep reset exited 0, health check passed, gate: heartbeat stalled since ", "; site rung 1 exited 0, health check passed, gate: heartbeat stalled since "} {
		if !strings.Contains(rec.Error, want) {
			t.Fatalf("the reset's error %q lacks %q", rec.Error, want)
		}
	}
	log := output(t, b, rec.ID)
	for _, want := range []string{"== rung 1/3: reset", "== rung 2/3: deep reset", "== rung 3/3: site rung 1", "site1 ran", "== card 1 is dead: every rung failed"} {
		if !strings.Contains(log, want) {
			t.Fatalf("the reset's log lacks %q:\n%s", want, log)
		}
	}
	if info := b.waitDone(doomed.ID); info.Outcome != store.OutcomeCardDead {
		t.Fatalf("the dead card's job = %+v", info.Job)
	}
	if info := b.waitDone(b.submit(0, "true").ID); info.Outcome != store.OutcomeSuccess {
		t.Fatalf("card 0's job = %+v", info.Job)
	}
}

// A card that keeps turning unfit after each recovery gets at most
// RecoveryMaxPerHour automatic ladders an hour; then it stays unfit, its
// jobs held, and status says why and what to do.
func TestLadder_AutomaticLaddersPerHourAreBounded(t *testing.T) {
	t.Parallel()
	b, ctl, cards := setupLadder(t, 0, func(o *Options) {
		o.RecoveryCooldown = time.Millisecond
		o.RecoveryMaxPerHour = 2
	})
	ctl.flag("reset-revives", true)
	for i := 1; i <= 2; i++ {
		cards.beat(1, false)
		poll(t, "an automatic ladder", func() bool { return len(ctl.calls()) >= 2*i })
		waitCard(b, 1, "healthy", func(c CardStatus) bool { return c.State == Healthy })
	}
	cards.beat(1, false)
	c := waitCard(b, 1, "unfit with recovery paused", func(c CardStatus) bool {
		return c.State == Unfit && strings.Contains(c.Recovery, "automatic recovery paused")
	})
	if !strings.Contains(c.Recovery, "2 ladders in the last hour") || !strings.Contains(c.Recovery, "reset --device 1") {
		t.Fatalf("card 1's recovery note = %q", c.Recovery)
	}
	time.Sleep(100 * time.Millisecond) // many sample intervals: still no third ladder
	if n := len(ctl.calls()); n != 4 {
		t.Fatalf("calls after the bound: %v", ctl.calls())
	}
	// A user's reset is not bounded, and takes the same ladder.
	b.waitDone(b.reset(ResetRequest{Card: cardPtr(1)})[0].JobID)
	waitCard(b, 1, "healthy after the user's reset", func(c CardStatus) bool { return c.State == Healthy })
}

// tt_device_queue.card.recoveries counts each rung climbed by rung and
// outcome: the reset that exited 0 and left the heartbeat stalled is
// unverified, the deep reset that brought the card back recovered.
func TestMetrics_RecoveriesByRungAndOutcome(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	b, ctl, cards := setupLadder(t, 0, func(o *Options) { o.MeterProvider = mp })
	ctl.flag("deep-revives", true)
	cards.beat(1, false)
	poll(t, "the ladder", func() bool { return len(ctl.calls()) >= 4 })
	waitCard(b, 1, "healthy", func(c CardStatus) bool { return c.State == Healthy && c.LastReset != nil })
	r := collect(t, reader)
	sum, ok := r[MetricRecoveries].(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is %T", MetricRecoveries, r[MetricRecoveries])
	}
	got := map[string]int64{}
	for _, p := range sum.DataPoints {
		c, _ := p.Attributes.Value("card")
		rung, _ := p.Attributes.Value("rung")
		out, _ := p.Attributes.Value("outcome")
		got[c.Emit()+"/"+rung.AsString()+"/"+out.AsString()] += p.Value
	}
	if len(got) != 2 || got["1/reset/unverified"] != 1 || got["1/deep_reset/recovered"] != 1 {
		t.Fatalf("%s = %v", MetricRecoveries, got)
	}
}
