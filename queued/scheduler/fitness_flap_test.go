package scheduler

import (
	"testing"
	"time"
)

// A reset that exits 0 and leaves the heartbeat stalled (tt-smi's lie)
// never shows the card fit, not even between the reset and the second
// heartbeat read that judges it: status and card.fit would flap to fit
// after every such reset, and an alert on a card that stays unfit
// (TTCardUnfit) would start over each time. (docs/fitness.md: a card is
// fit again only when the gate passes, on two heartbeat reads.)
func TestFitness_AResetThatLeavesTheHeartbeatStalledNeverShowsTheCardFit(t *testing.T) {
	t.Parallel()
	cards := newFakeCards(t, 0, 1)
	ctl := newControls(t)
	b := setup(t, func(o *Options) {
		cards.options(o)
		o.Controls = ctl.options()
		o.RecoveryCooldown = time.Hour
	})
	cards.beat(1, false)
	// Unfit, or already past it: queued starts the ladder at once, and
	// a busy machine's poll may first see it recovering or dead.
	waitCard(b, 1, "unfit", func(c CardStatus) bool { return c.State == Unfit || c.State == Recovering || c.State == Dead })
	// Watch card 1 from here until its reset has ended and three
	// heartbeat gaps have passed since: it must never read healthy.
	var until time.Time
	for {
		c := cardStatus(b, 1)
		if c.State == Healthy {
			t.Fatalf("card 1 shows healthy with its heartbeat stalled: %+v (reset calls %v)", c, ctl.calls())
		}
		if until.IsZero() && c.LastReset != nil && c.Reset == nil {
			until = time.Now().Add(3 * heartbeatGap)
		}
		if !until.IsZero() && time.Now().After(until) {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if got := ctl.calls(); len(got) < 2 {
		t.Fatalf("no automatic reset of card 1: %v", got)
	}
}
