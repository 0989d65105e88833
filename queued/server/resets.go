package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

// resets take reset requests (POST /reset): they schedule the resets and
// answer at once, before any has run.
type resets struct {
	*base
}

// handleReset is POST /reset: schedule resets and answer at once with
// each card's reset job, or why it was skipped.
func (h *resets) handleReset(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(bodyReadTimeout))
	req, err := h.decodeReset(r)
	rc.SetReadDeadline(time.Time{})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if req.Force && !h.rules.mayForce(r) {
		h.fail(w, r, fmt.Errorf("a forced reset ends another's hold and runs under another user's process holding the card: only %s may force one: %w", h.rules.adminsText(), ErrForbidden))
		return
	}
	h.rules.resetPolicy(r, &req)
	before := h.sched.Status()
	outs, err := h.sched.Reset(req)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	resp := api.ResetResponse{Resets: make([]api.ResetEntry, len(outs))}
	for i, o := range outs {
		resp.Resets[i] = api.ResetEntry{DeviceID: strconv.Itoa(o.Card), Action: resetAction(o), ResetJobID: o.JobID, State: string(o.State),
			Coalesced: o.Coalesced, Skipped: o.Skipped, Reason: o.Reason, InterruptedJobID: o.Interrupted,
			WaitsForJobID: o.WaitsFor, WaitsForOwner: o.WaitsForOwner, OnHold: o.OnHold}
	}
	pythonReset(&resp, before)
	writeJSON(w, http.StatusOK, resp)
}
