package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/scheduler"
	"github.com/ttkit/ttkit/queued/store"
)

// errNoRecordedOwner refuses to resubmit, on a shared daemon, a job with
// no recorded owner: the copy would run as whoever asked, with the old
// job's environment, and no one can say whose that was.
var errNoRecordedOwner = errors.New("it has no recorded owner, so there is no one to run the copy as; submit the command again yourself")

// handleResubmit is POST /resubmit: queue a copy of a job (its program,
// working directory, environment, timeout and repeat), on its card or on
// device_id's. The copy belongs to the job's owner, whoever asks: an
// admin's resubmit of a user's job runs as that user, never with the
// admin's identity and the user's environment (a BASH_ENV or LD_PRELOAD
// in it would run as the admin). Who may ask is who may see the job.
func (s *Server) handleResubmit(w http.ResponseWriter, r *http.Request) {
	fields, err := s.readBody(w, r, "job_id", "device_id", "client_id")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	raw, _, err := stringField(fields, "job_id")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	clientID, _, err := stringField(fields, "client_id")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id, err := s.resolve("job_id", raw)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	old, err := s.sched.Job(id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.mayTouch(r, &old.Job, true); err != nil {
		s.fail(w, r, err)
		return
	}
	spec, err := s.resubmitSpec(r, &old.Job, clientID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if dev, ok := fields["device_id"]; ok && !isNull(dev) {
		if spec.Card, err = s.parseDevice(dev); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	slotOf(r).release() // as for /queue: the commit is waited for without a slot
	info, err := s.sched.Submit(spec)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.answerQueued(w, info, old.ID)
}

// resubmitSpec is the copy of rec to submit for r's caller.
func (s *Server) resubmitSpec(r *http.Request, rec *store.Job, clientID string) (scheduler.JobSpec, error) {
	if rec.Kind == store.KindReset {
		return scheduler.JobSpec{}, fieldErr("job_id", "%s is a reset, not a job; POST /reset with its device_id schedules another", rec.ID)
	}
	timeout := time.Duration(rec.Timeout) * time.Second
	if s.cfg.MaxTimeout > 0 && timeout > s.cfg.MaxTimeout {
		return scheduler.JobSpec{}, fieldErr("job_id", "job %s's timeout %ds is above today's maximum %ds (TT_DEVICE_MAX_TIMEOUT); queue it again with a shorter one",
			rec.ID, rec.Timeout, int64(s.cfg.MaxTimeout/time.Second))
	}
	spec := scheduler.JobSpec{
		Card: rec.Card(), Cmd: rec.Cmd, Cwd: rec.Cwd, Env: rec.Env, EnvFromShell: rec.EnvFromShell,
		Timeout: timeout, Repeat: rec.Repeat, ClientID: clientID,
	}
	if spec.ClientID == "" {
		spec.ClientID = rec.ClientID
	}
	if !s.cfg.Shared {
		return spec, nil
	}
	if rec.OwnerUID == nil {
		return spec, fmt.Errorf("resubmitting job %s: %w: %w", rec.ID, errNoRecordedOwner, ErrConflict)
	}
	uid := *rec.OwnerUID
	spec.OwnerUID, spec.Owner = &uid, rec.Owner
	return spec, nil
}

// answerQueued answers a submission: 201 with the new job, its place and
// estimates, and, for a resubmit, the job it copies and whose it is.
func (s *Server) answerQueued(w http.ResponseWriter, info scheduler.JobInfo, from string) {
	w.Header().Set("Location", "/job/"+info.ID)
	writeJSON(w, http.StatusCreated, api.QueueResponse{
		JobID: info.ID, DeviceID: strconv.Itoa(info.Card()), State: string(info.State),
		Position: info.Position, EstimatedWaitSec: info.EstimatedWait.Seconds(), EstimatedRunSec: info.EstimatedRun.Seconds(),
		EstimateKnown: info.EstimateKnown, ResubmittedFrom: from, Owner: info.Owner,
		OutputFile: s.sched.OutputPath(info.ID), Repeat: info.Repeat, Timeout: info.Timeout, Mode: modeOf(info.Kind),
	})
}
