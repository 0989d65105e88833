package scheduler

import (
	"fmt"
	"time"

	"github.com/ttkit/ttkit/queued/store"
)

// GateVerdict is what a gate run on demand (Scheduler.Gate) found on one
// card.
type GateVerdict struct {
	Card int
	// State is the card's state after the gate, as status shows it.
	State CardState
	// Reason says why the card is unfit or dead; "" when it is fit.
	Reason string
	// Probe says what became of the site probe: "passed", "failed",
	// "not due", "none", or why it did not run.
	Probe string
	// Recovery says how an unfit card recovers, or why it does not by
	// itself; "" when the card is fit or dead.
	Recovery string
}

// Gate runs the fitness gate on card now, as before a job: a fresh read
// of its device node, sysfs entry and heartbeat (the second heartbeat
// read, 0.5 s after the first, when one is needed), and the site probe:
// always, or only where it is due when probeIfDue, and never under a
// running job or reset (the gate before a job never runs it there
// either). The verdict is published as the card's fitness, so an unfit
// card holds its jobs and its sampler asks for its recovery within
// GateInterval, within the recovery bounds. Slurm's jobs are not
// queued's: the Epilog gates the cards of a job that failed with it, and
// the Prolog the cards it is about to hold. A dead card is not gated:
// its verdict is its death.
func (s *Scheduler) Gate(card int, probeIfDue bool) (GateVerdict, error) {
	c := s.core
	cd, ok := c.cards[card]
	if !ok {
		return GateVerdict{}, fmt.Errorf("card %d: %w", card, ErrUnknownCard)
	}
	v := GateVerdict{Card: card, Probe: "none"}
	sm := c.fit.samplers[card]
	c.mu.Lock()
	busy := ""
	if cur := cd.current; cur != nil && cur.rec.Kind != store.KindHold {
		busy = fmt.Sprintf("not run: card %d runs %s %s", card, cur.rec.Kind, cur.rec.ID)
	}
	dead := cd.dead != nil
	c.mu.Unlock()
	if sm != nil && !dead {
		if c.opt.GateCmd != "" {
			switch {
			case busy != "":
				v.Probe = busy
			case !probeIfDue || sm.probeNeeded():
				sm.probeDue.Store(true)
				sm.probeIfNeeded()
				sm.mu.Lock()
				v.Probe = "passed"
				if sm.probeFail != "" {
					v.Probe = "failed"
				}
				sm.mu.Unlock()
			default:
				v.Probe = "not due"
			}
		}
		sm.mu.Lock()
		sm.readLocked(time.Now())
		sm.mu.Unlock()
		verdict := sm.fresh(c.fit.staleAfter())
		c.fit.publish(card, verdict)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v.State = cd.shownState()
	switch {
	case cd.dead != nil:
		v.Reason = cd.dead.reason
	case cd.unfit != "":
		v.Reason = cd.unfit
		v.Recovery = recoveryNote(&c.opt, cd)
	}
	return v, nil
}

// recoveryNote says how an unfit card cd recovers under the options o: by
// a reset that is pending, by one queued asks for itself, or why it does
// not. The core's lock is held.
func recoveryNote(o *Options, cd *card) string {
	switch {
	case cd.reset != nil:
		return fmt.Sprintf("reset %s %s", cd.reset.rec.ID, cd.reset.rec.State)
	case o.RecoveryCooldown < 0 || o.Controls.Reset == "" || o.Controls.HealthCheck == "":
		return "queued does not recover cards by itself (TT_DEVICE_RECOVERY_COOLDOWN, TT_DEVICE_RESET_CMD): reset it by hand"
	default:
		return fmt.Sprintf("queued asks for its reset within %s, at most once per %s (TT_DEVICE_RECOVERY_COOLDOWN)",
			o.GateInterval, o.RecoveryCooldown)
	}
}
