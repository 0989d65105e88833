package server

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/scheduler"
	"github.com/ttkit/ttkit/queued/store"
)

// holds answers POST /hold and POST /release: a hold takes cards in their
// FIFO turn and keeps them until released (for Slurm, maintenance).
type holds struct {
	*base
	// maxTimeout bounds a non-admin's hold on a shared daemon, as it
	// bounds their jobs.
	maxTimeout time.Duration
}

var holdRequestFields = wireFields[api.HoldRequest]()

var releaseRequestFields = wireFields[api.ReleaseRequest]()

// handleHold is POST /hold: queue a hold and answer 201 at once, with its
// state (queued, or active when its cards were free).
func (h *holds) handleHold(w http.ResponseWriter, r *http.Request) {
	fields, err := readBody(w, r, holdRequestFields)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	spec, err := h.decodeHold(fields)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.boundHold(r, &spec); err != nil {
		h.fail(w, r, err)
		return
	}
	spec.OwnerUID, spec.Owner = h.rules.ownerOf(r)
	if err := h.holdFor(r, fields, &spec); err != nil {
		h.fail(w, r, err)
		return
	}
	info, err := h.sched.Hold(spec)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/job/"+info.ID)
	writeJSON(w, http.StatusCreated, api.HoldResponse{HoldID: info.ID, DeviceID: info.DeviceText(), State: holdState(info.State),
		Position: info.Position})
}

// decodeHold validates a POST /hold body.
func (h *holds) decodeHold(fields map[string]json.RawMessage) (scheduler.HoldSpec, error) {
	var spec scheduler.HoldSpec
	cards, text, err := decodeDevices(fields, h.sched.Cards())
	if err != nil {
		return spec, err
	}
	spec.Cards, spec.DeviceSpec = cards, text
	for _, f := range []struct {
		name string
		dst  *string
		max  int
	}{{"reason", &spec.Reason, api.MaxHoldReasonBytes}, {"slurm_job_id", &spec.SlurmJobID, api.MaxSlurmJobIDBytes}, {"client_id", &spec.ClientID, api.MaxClientIDBytes}} {
		v, _, err := stringField(fields, f.name)
		if err != nil {
			return spec, err
		}
		if len(v) > f.max {
			return spec, fieldErr(f.name, "%d bytes, the limit is %d", len(v), f.max)
		}
		if strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return spec, fieldErr(f.name, "contains control characters")
		}
		*f.dst = v
	}
	expires, _, err := intField(fields, "expires_sec")
	if err != nil {
		return spec, err
	}
	if expires < 0 || expires > api.MaxSeconds {
		return spec, fieldErr("expires_sec", "%d: want seconds from 0 (never) to ten years (%d)", expires, api.MaxSeconds)
	}
	spec.Expires = time.Duration(expires) * time.Second
	return spec, nil
}

// boundHold keeps a user's hold on a shared daemon within what a job of
// theirs could take: a hold that never ends (expires_sec 0) ends after
// the longest timeout, and a longer one is refused. Admins (root's Slurm
// Prolog, an operator's maintenance) hold as long as they ask.
//
// Only admins tie a hold to a Slurm job (slurm_job_id) on a shared daemon:
// root's Epilog resets the cards of the hold it finds for its job when
// the Prolog's own record is lost, and releases every hold of that job,
// so a user's hold tied to someone's job id, or to their own on cards
// Slurm never gave it, would steer what root does.
func (h *holds) boundHold(r *http.Request, spec *scheduler.HoldSpec) error {
	if !h.rules.shared() || h.rules.of(r).admin() {
		return nil
	}
	if spec.SlurmJobID != "" {
		return fieldErr("slurm_job_id", "%q: only admins (%s: the Slurm Prolog) may tie a hold to a Slurm job", spec.SlurmJobID, h.rules.adminsText())
	}
	switch {
	case spec.Expires == 0:
		spec.Expires = h.maxTimeout
	case spec.Expires > h.maxTimeout:
		return fieldErr("expires_sec", "%d is above %d, the longest a job may run (TT_DEVICE_MAX_TIMEOUT); only admins (%s) may hold a card longer",
			int64(spec.Expires/time.Second), int64(h.maxTimeout/time.Second), h.rules.adminsText())
	}
	return nil
}

// holdFor makes the hold for_uid's when the body names one: only an
// admin may (root's Slurm Prolog, for the Slurm job's user), and only on
// a shared daemon, where holds have owners; the user then owns the hold
// and, under TT_DEVICE_ENFORCE=acl, alone opens its cards.
func (h *holds) holdFor(r *http.Request, fields map[string]json.RawMessage, spec *scheduler.HoldSpec) error {
	v, given, err := intField(fields, "for_uid")
	if err != nil || !given {
		return err
	}
	switch {
	case !h.rules.shared():
		return fieldErr("for_uid", "%d: a user daemon's holds are its user's; only a shared (system-mode) daemon takes a hold for someone", v)
	case !h.rules.of(r).admin():
		return fieldErr("for_uid", "%d: only admins (%s: the Slurm Prolog) may take a hold for another user", v, h.rules.adminsText())
	case v <= 0 || v >= math.MaxUint32:
		return fieldErr("for_uid", "%d: want the uid of a user other than root", v)
	}
	uid := uint32(v)
	spec.OwnerUID, spec.Owner = &uid, userName(uid)
	return nil
}

// handleRelease is POST /release: end hold_id, or every live hold taken
// for slurm_job_id (none is no error: an Epilog releases what there is).
// A hold is its owner's and the admins' to release.
func (h *holds) handleRelease(w http.ResponseWriter, r *http.Request) {
	fields, err := readBody(w, r, releaseRequestFields)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	rawID, hasID, err := stringField(fields, "hold_id")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	slurmID, hasSlurm, err := stringField(fields, "slurm_job_id")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	who := "released by " + h.rules.callerName(r)
	var out api.ReleaseResponse
	switch {
	case hasID && hasSlurm && rawID != "" && slurmID != "":
		h.fail(w, r, fieldErr("hold_id", "give hold_id or slurm_job_id, not both"))
		return
	case hasID && rawID != "":
		rec, err := h.jobFor(r, "hold_id", rawID, false)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		info, err := h.sched.Release(rec.ID, who)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		out.Released = []api.Job{jobView(info)}
	case hasSlurm && slurmID != "":
		a := h.rules.of(r)
		list, err := h.sched.List(scheduler.ListFilter{Kind: store.KindHold, SlurmJobID: slurmID, Active: true, Limit: 1000})
		if err != nil {
			h.fail(w, r, err)
			return
		}
		out.Released = []api.Job{}
		for _, hold := range list {
			if a.mayTouch(&hold.Job, false) != nil {
				continue // another user's hold for the same Slurm job id
			}
			info, err := h.sched.Release(hold.ID, fmt.Sprintf("%s (Slurm job %s)", who, slurmID))
			if err != nil {
				continue // ended meanwhile
			}
			out.Released = append(out.Released, jobView(info))
		}
	default:
		h.fail(w, r, fieldErr("hold_id", "required: the hold to release (or slurm_job_id)"))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// holdState is a hold's state as the hold answers say it: an active hold
// is a running job.
func holdState(s store.State) string {
	if s == store.StateRunning {
		return "active"
	}
	return string(s)
}
