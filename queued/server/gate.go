package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/scheduler"
)

// gates run the fitness gate on demand (POST /gate): the Slurm Prolog and
// Epilog ask for it, since Slurm's jobs pass no gate of queued's own.
type gates struct {
	*base
}

var gateRequestFields = wireFields[api.GateRequest]()

// handleGate is POST /gate: run the gate now on each card of device_id
// and answer with each verdict. It answers once every gate has run: the
// site probe may take TT_DEVICE_GATE_TIMEOUT. Only admins (and the one
// user of a user daemon) may ask: the probe runs as the reset user, and
// an unfit verdict holds the card's jobs and starts its recovery.
func (h *gates) handleGate(w http.ResponseWriter, r *http.Request) {
	fields, err := readBody(w, r, gateRequestFields)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if raw, ok := fields["device_id"]; !ok || isNull(raw) {
		h.fail(w, r, fieldErr("device_id", "required: the card (or cards, 0,3) to gate"))
		return
	}
	cards, _, err := decodeDevices(fields, h.sched.Cards())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var probeIfDue bool
	if raw, ok := fields["probe_if_due"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &probeIfDue); err != nil {
			h.fail(w, r, fieldErr("probe_if_due", "want true or false, got %s", jsonType(raw)))
			return
		}
	}
	if !h.rules.mayForce(r) {
		h.fail(w, r, fmt.Errorf("the gate runs the site probe and may start a card's recovery: only %s may run it: %w", h.rules.adminsText(), ErrForbidden))
		return
	}
	resp := api.GateResponse{Cards: make([]api.GateCard, 0, len(cards))}
	for _, n := range cards {
		v, err := h.sched.Gate(n, probeIfDue)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		resp.Cards = append(resp.Cards, api.GateCard{DeviceID: strconv.Itoa(n), Fit: v.State == scheduler.Healthy, State: string(v.State),
			Reason: v.Reason, Probe: v.Probe, Recovery: v.Recovery})
	}
	writeJSON(w, http.StatusOK, resp)
}
