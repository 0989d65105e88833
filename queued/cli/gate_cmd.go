package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

// ExitUnfit is the status of `gate` when a card is unfit or dead: apart
// from a refusal or an unreachable queued (1), so the Slurm Prolog fails
// (draining the node) only for a card that is really unfit, never for a
// queued it could not reach.
const ExitUnfit = 3

// gatePoll is how often `gate --wait` looks at an unfit card again.
const gatePoll = time.Second

// GateCmd runs the fitness gate now on cards, the site probe included,
// and says whether each is fit. Slurm's jobs pass no gate of queued's own:
// the Prolog gates the cards it is about to hold, waiting for an unfit
// card's recovery, and the Epilog gates the cards of a job that failed
// (docs/slurm.md). Admins only on a shared queued.
type GateCmd struct {
	Device string   `short:"d" required:"" placeholder:"N" help:"The card (or cards: 0,1 or 0-3) to gate."`
	Wait   Duration `placeholder:"DURATION" help:"Wait at most this long for an unfit or recovering card to pass the gate again (seconds, or such as 10m); a dead card ends the wait at once."`
}

// Run gates the cards, then, with --wait, gates the unfit ones again
// every second (the probe only where it is due) until all pass, one is
// dead, or the wait runs out. It exits 0 when every card is fit, 3 when
// one is not.
func (g *GateCmd) Run(a *App) error {
	if _, err := api.ParseDevices(g.Device); err != nil {
		return usageErr("--device: %v", err)
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	began := time.Now()
	req := api.GateRequest{DeviceID: strings.TrimSpace(g.Device)}
	res, err := c.Gate(a.ctx, req)
	if err != nil {
		return a.explain(a.ctx, err)
	}
	for wait := time.Duration(g.Wait); wait > 0 && waitsForRecovery(res); {
		left := wait - time.Since(began)
		if left <= 0 {
			break
		}
		select {
		case <-a.ctx.Done():
			return &Error{Code: ExitInterrupted, Err: errors.New("interrupted while waiting for the gate")}
		case <-time.After(min(gatePoll, left)):
		}
		req.ProbeIfDue = true
		if res, err = c.Gate(a.ctx, req); err != nil {
			return a.explain(a.ctx, err)
		}
	}
	if a.JSON {
		if err := a.printJSON(res); err != nil {
			return err
		}
	}
	var bad []string
	for _, card := range res.Cards {
		if card.Fit {
			if !a.JSON {
				a.println("card %s: fit", card.DeviceID)
			}
			continue
		}
		bad = append(bad, describeUnfit(card, time.Duration(g.Wait)))
	}
	if len(bad) == 0 {
		return nil
	}
	if a.JSON {
		return &Error{Code: ExitUnfit}
	}
	return &Error{Code: ExitUnfit, Err: errors.New(strings.Join(bad, "; "))}
}

// waitsForRecovery says some card of res may still pass: none is dead,
// and one is unfit or recovering.
func waitsForRecovery(res api.GateResponse) bool {
	waits := false
	for _, c := range res.Cards {
		switch {
		case c.State == "dead":
			return false
		case !c.Fit:
			waits = true
		}
	}
	return waits
}

// describeUnfit says why a card did not pass the gate (after waiting
// wait for it, when wait is set).
func describeUnfit(c api.GateCard, wait time.Duration) string {
	if c.State == "dead" {
		return fmt.Sprintf("card %s is dead: %s", c.DeviceID, c.Reason)
	}
	s := "card " + c.DeviceID + " is " + c.State
	if wait > 0 {
		s = "card " + c.DeviceID + " is still " + c.State + " after " + wait.String()
	}
	if c.Reason != "" {
		s += ": " + c.Reason
	}
	if c.Recovery != "" {
		s += " (" + c.Recovery + ")"
	}
	return s
}
