package api

import (
	"context"
	"net/http"
)

// GatePath is the endpoint that runs the fitness gate on demand.
const GatePath = "/gate"

// GateRequest is the body of POST /gate: run the fitness gate now on the
// cards of DeviceID (one card, or a list such as 0,3), as it runs before
// a job: a fresh read of each card's device node, sysfs entry and
// heartbeat, and the site probe (TT_DEVICE_GATE_CMD). The Slurm Epilog
// asks for it after a job that failed, and the Prolog before it takes
// its hold, since Slurm's jobs are not queued's and pass no gate of
// queued's own. Admins only on a shared daemon: the probe runs as the
// reset user, and an unfit verdict starts a card's recovery.
type GateRequest struct {
	DeviceID string `json:"device_id"`
	// ProbeIfDue runs the site probe only where it is due (after a reset
	// or a bad job, or a failed probe's retry time), as the gate before a
	// job does, rather than always: what a caller that polls asks for,
	// so the probe does not run every second.
	ProbeIfDue bool `json:"probe_if_due,omitempty"`
}

// GateResponse answers POST /gate: each card's verdict, in the order
// asked.
type GateResponse struct {
	Cards []GateCard `json:"cards"`
}

// GateCard is the gate's verdict on one card.
type GateCard struct {
	DeviceID string `json:"device_id"`
	// Fit says the card passed: its state is healthy.
	Fit bool `json:"fit"`
	// State is the card's state after the gate, as in status: healthy,
	// unfit, recovering or dead.
	State string `json:"state"`
	// Reason says why the card is unfit or dead; empty when fit.
	Reason string `json:"reason,omitempty"`
	// Probe says what became of the site probe: "passed", "failed",
	// "not due", "none" (no TT_DEVICE_GATE_CMD), or why it did not run
	// ("not run: card runs job ...": never under a running job or reset).
	Probe string `json:"probe"`
	// Recovery says that queued recovers the unfit card by itself (its
	// sampler queues the reset within TT_DEVICE_GATE_INTERVAL, within
	// the recovery bounds), or why not; empty when fit or dead.
	Recovery string `json:"recovery,omitempty"`
}

// Gate runs the fitness gate now on the cards of req.DeviceID.
func (c *Client) Gate(ctx context.Context, req GateRequest) (GateResponse, error) {
	var out GateResponse
	_, err := c.do(ctx, http.MethodPost, GatePath, req, &out)
	return out, err
}
