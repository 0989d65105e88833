package server

import (
	"net/http"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/scheduler"
	"github.com/ttkit/ttkit/queued/store"
)

// submissions take new jobs: POST /queue (decodeQueue validates it) and
// POST /resubmit (a copy of a job, made by the daemon). Only the
// validation holds a handler slot: waiting for the commit to be durable
// does not.
type submissions struct {
	*base
	// maxTimeout is the largest timeout a job may have
	// (TT_DEVICE_MAX_TIMEOUT).
	maxTimeout time.Duration
	// cwd looks at a submission's working directory, on a daemon whose
	// rules let it (accessRules.probesCwd).
	cwd *cwdProber
}

// handleQueue is POST /queue: validate, durably queue, answer 201.
func (h *submissions) handleQueue(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(bodyReadTimeout))
	spec, err := h.decodeQueue(r)
	rc.SetReadDeadline(time.Time{})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	// The slot bounds CPU work; waiting for the commit to be durable is
	// not, so the slot goes back first. A commit then carries every
	// submission validated meanwhile, not at most Workers of them, and the
	// next ones are decoded while the fsync runs. Answering afterwards is a
	// few hundred bytes, written without a slot.
	slotOf(r).release()
	spec.OwnerUID, spec.Owner = h.rules.ownerOf(r)
	if len(spec.Array) > 0 {
		h.queueArray(w, r, spec)
		return
	}
	info, err := h.sched.Submit(spec)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.answerQueued(w, info, "")
}

// queueArray queues an array's elements, all or none, and answers with
// the first element's place and estimates, the array's id and every
// element's id.
func (h *submissions) queueArray(w http.ResponseWriter, r *http.Request, spec scheduler.JobSpec) {
	infos, err := h.sched.SubmitArray(spec)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ids := make([]string, len(infos))
	for i, info := range infos {
		ids[i] = info.ID
	}
	info := infos[0]
	w.Header().Set("Location", "/job/"+info.ID)
	writeJSON(w, http.StatusCreated, api.QueueResponse{
		JobID: info.ID, DeviceID: info.DeviceText(), State: string(info.State),
		Position: info.Position, EstimatedWaitSec: info.EstimatedWait.Seconds(), EstimatedRunSec: info.EstimatedRun.Seconds(),
		EstimateKnown: info.EstimateKnown, Owner: info.Owner,
		OutputFile: h.sched.OutputPath(info.ID), Repeat: info.Repeat, Timeout: info.Timeout, Mode: modeOf(info.Kind),
		ArrayID: info.ArrayID, JobIDs: ids,
	})
}

// handleResubmit is POST /resubmit: queue a copy of a job (its program,
// working directory, environment, timeout and repeat), on its card or on
// device_id's. The copy belongs to the job's owner, whoever asks: an
// admin's resubmit of a user's job runs as that user, never with the
// admin's identity and the user's environment (a BASH_ENV or LD_PRELOAD
// in it would run as the admin). Who may ask is who may see the job.
func (h *submissions) handleResubmit(w http.ResponseWriter, r *http.Request) {
	fields, err := readBody(w, r, resubmitRequestFields)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	raw, _, err := stringField(fields, "job_id")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	clientID, _, err := stringField(fields, "client_id")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	old, err := h.jobFor(r, "job_id", raw, true)
	if err == nil {
		old, err = h.sched.Record(old.ID) // whole: the copy runs its command and environment
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	spec, err := h.resubmitSpec(&old.Job, clientID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if dev, ok := fields["device_id"]; ok && !isNull(dev) {
		if spec.Card, err = parseDevice(dev, h.sched.Cards()); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	slotOf(r).release() // as for /queue: the commit is waited for without a slot
	info, err := h.sched.Submit(spec)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.answerQueued(w, info, old.ID)
}

// resubmitSpec is the copy of rec to submit, its owner rec's.
func (h *submissions) resubmitSpec(rec *store.Job, clientID string) (scheduler.JobSpec, error) {
	if rec.Kind == store.KindReset {
		return scheduler.JobSpec{}, fieldErr("job_id", "%s is a reset, not a job; POST /reset with its device_id schedules another", rec.ID)
	}
	timeout := time.Duration(rec.Timeout) * time.Second
	if h.maxTimeout > 0 && timeout > h.maxTimeout {
		return scheduler.JobSpec{}, fieldErr("job_id", "job %s's timeout %ds is above today's maximum %ds (TT_DEVICE_MAX_TIMEOUT); queue it again with a shorter one",
			rec.ID, rec.Timeout, int64(h.maxTimeout/time.Second))
	}
	if err := overBudget("job_id", "job "+rec.ID+"'s ", rec.Cmd, rec.Env, "queue it again with fewer or smaller variables"); err != nil {
		return scheduler.JobSpec{}, err
	}
	spec := scheduler.JobSpec{
		Card: rec.Card(), Cards: spanned(*rec), DeviceSpec: rec.DeviceSpec, Cmd: rec.Cmd, Cwd: rec.Cwd, Env: rec.Env, EnvFromShell: rec.EnvFromShell,
		Timeout: timeout, Repeat: rec.Repeat, ClientID: clientID,
		IdleTimeout: time.Duration(rec.IdleTimeout) * time.Second, Retries: rec.Retries,
	}
	if spec.ClientID == "" {
		spec.ClientID = rec.ClientID
	}
	var err error
	spec.OwnerUID, spec.Owner, err = h.rules.copyOwner(rec)
	return spec, err
}

// answerQueued answers a submission: 201 with the new job, its place and
// estimates, and, for a resubmit, the job it copies and whose it is.
func (h *submissions) answerQueued(w http.ResponseWriter, info scheduler.JobInfo, from string) {
	w.Header().Set("Location", "/job/"+info.ID)
	writeJSON(w, http.StatusCreated, api.QueueResponse{
		JobID: info.ID, DeviceID: info.DeviceText(), State: string(info.State),
		Position: info.Position, EstimatedWaitSec: info.EstimatedWait.Seconds(), EstimatedRunSec: info.EstimatedRun.Seconds(),
		EstimateKnown: info.EstimateKnown, ResubmittedFrom: from, Owner: info.Owner,
		OutputFile: h.sched.OutputPath(info.ID), Repeat: info.Repeat, Timeout: info.Timeout, Mode: modeOf(info.Kind),
	})
}
