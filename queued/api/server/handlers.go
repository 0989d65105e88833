package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ttkit/ttkit/queued/api"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ttkit/ttkit/queued/scheduler"
)

// readBody reads a POST body with a deadline, so a client that stops
// sending frees its handler.
// An empty body counts as {}.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, known ...string) (map[string]json.RawMessage, error) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(bodyReadTimeout))
	defer rc.SetReadDeadline(time.Time{})
	return readOptionalObject(r, known...)
}

// handleQueue is POST /queue: validate, durably queue, answer 201. Only
// the validation holds a handler slot.
func (s *Server) handleQueue(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(bodyReadTimeout))
	spec, err := s.decodeQueue(r)
	rc.SetReadDeadline(time.Time{})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// The slot bounds CPU work; waiting for the commit to be durable is
	// not, so the slot goes back first. A commit then carries every
	// submission validated meanwhile, not at most Workers of them, and the
	// next ones are decoded while the fsync runs. Answering afterwards is a
	// few hundred bytes, written without a slot.
	slotOf(r).release()
	spec.OwnerUID, spec.Owner = s.ownerOf(r)
	info, err := s.sched.Submit(spec)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.answerQueued(w, info, "")
}

// handleKill is POST /kill: the job job_id names, or, without one, the
// caller's running job (see runningOf), as the Python tt-device-queue's
// kill without an id stops the running job.
func (s *Server) handleKill(w http.ResponseWriter, r *http.Request) {
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
	var card *int
	if dev, ok := fields["device_id"]; ok && !isNull(dev) {
		n, err := s.parseDevice(dev)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		card = &n
	}
	if strings.TrimSpace(raw) == "" {
		running, others, err := s.runningOf(r, card, clientID)
		switch {
		case errors.Is(err, errSeveralRunning):
			writeError(w, http.StatusConflict, err.Error())
			return
		case err != nil:
			s.fail(w, r, err)
			return
		case running == nil:
			a := s.accessOf(r)
			none := api.NothingRunning{Error: api.NothingRunningMessage, Running: make([]api.Job, len(others))}
			for i, o := range others {
				none.Running[i] = s.view(o)
				redact(a, &none.Running[i], &others[i].Job)
			}
			writeJSON(w, http.StatusOK, none)
			return
		}
		raw = running.ID
	}
	id, err := s.resolve("job_id", raw)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rec, err := s.sched.Job(id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.mayTouch(r, &rec.Job, false); err != nil {
		s.fail(w, r, err)
		return
	}
	info, err := s.sched.Kill(id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	j := s.view(info)
	j.Killed = killed(info)
	writeJSON(w, http.StatusOK, j)
}

// handleReset is POST /reset: schedule resets and answer at once with
// each card's reset job, or why it was skipped.
func (s *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(bodyReadTimeout))
	req, err := s.decodeReset(r)
	rc.SetReadDeadline(time.Time{})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.resetPolicy(r, &req)
	before := s.sched.Status()
	outs, err := s.sched.Reset(req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	resp := api.ResetResponse{Resets: make([]api.ResetEntry, len(outs))}
	for i, o := range outs {
		resp.Resets[i] = api.ResetEntry{DeviceID: strconv.Itoa(o.Card), Action: resetAction(o), ResetJobID: o.JobID, State: string(o.State),
			Coalesced: o.Coalesced, Skipped: o.Skipped, Reason: o.Reason, InterruptedJobID: o.Interrupted,
			WaitsForJobID: o.WaitsFor, WaitsForOwner: o.WaitsForOwner}
	}
	pythonReset(&resp, before)
	writeJSON(w, http.StatusOK, resp)
}

// resolve validates an id or prefix and finds the one job it names.
func (s *Server) resolve(field, raw string) (string, error) {
	id, err := decodeID(field, raw)
	if err != nil {
		return "", err
	}
	return s.sched.Resolve(id)
}

// handleStatus is GET /status.
func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	sched := s.sched.Status()
	st := statusView(sched)
	st.PythonStatus = s.pythonStatus(sched, time.Now())
	st.Version = s.cfg.Version
	st.Mode, st.Caller = s.mode(), s.callerView(r)
	st.HTTP = api.HTTPStatus{Workers: cap(s.slots), Busy: int(s.busy.Load()), Waiting: int(s.waiting.Load()),
		LongPolls: int(s.polling.Load()), Conns: s.conns.count(), MaxConns: s.conns.max,
		Evicted: s.conns.evicted.Load(), Refused: s.conns.refused.Load()}
	writeJSON(w, http.StatusOK, st)
}

// handleJob is GET /job/<id>.
func (s *Server) handleJob(w http.ResponseWriter, r *http.Request) {
	id, err := s.resolve("job id", r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	info, err := s.sched.Job(id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.mayTouch(r, &info.Job, true); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.view(info))
}

// queryInt reads a non-negative integer query parameter.
func queryInt(r *http.Request, name string, def, max int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fieldErr(name, "%q is not a non-negative whole number", cut(v, 40))
	}
	if n > max {
		return 0, fieldErr(name, "%d is above the maximum %d", n, max)
	}
	return n, nil
}

// queryWait reads wait= in seconds (fractions allowed), at most api.MaxWait.
func queryWait(r *http.Request) (time.Duration, error) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f != f {
		return 0, fieldErr("wait", "%q is not a non-negative number of seconds", cut(v, 40))
	}
	if f > api.MaxWait.Seconds() {
		return 0, fieldErr("wait", "%s seconds is above the maximum %d; ask again instead", v, int(api.MaxWait.Seconds()))
	}
	return time.Duration(f * float64(time.Second)), nil
}

// waitChange gives the handler slot back, waits for one of the channels,
// the deadline, the client leaving or the server closing, and takes a slot
// again. It reports whether the handler should look again (false: answer
// now with what it has, or give up if the slot could not be had).
func (s *Server) waitChange(r *http.Request, deadline time.Time, a, b <-chan struct{}) (again bool, err error) {
	d := time.Until(deadline)
	if d <= 0 {
		return false, nil
	}
	sl := slotOf(r)
	sl.release()
	s.polling.Add(1)
	defer s.polling.Add(-1)
	t := time.NewTimer(d)
	defer t.Stop()
	again = true
	select {
	case <-a:
	case <-b:
	case <-t.C:
	case <-s.closing:
		again = false
	case <-r.Context().Done():
		again = false
	}
	if err := sl.acquire(r.Context()); err != nil {
		return false, err
	}
	return again, nil
}

// handleLogs is GET /logs/<id>?offset=&limit=&wait=: up to limit bytes
// of output from offset. With wait, it answers as soon as there is output
// past offset or the job is over, or when wait runs out; meanwhile it
// holds no handler slot. The answer is the Python tt-device-queue's JSON
// unless the request asks for the raw bytes (wantsRaw); the X-Log-*
// headers come with both.
func (s *Server) handleLogs(w http.ResponseWriter, r *http.Request) {
	id, err := s.resolve("job id", r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	offset, err := queryInt(r, "offset", 0, 1<<62)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	limit, err := queryInt(r, "limit", api.DefaultLogChunk, api.MaxLogChunk)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if limit == 0 {
		limit = api.DefaultLogChunk
	}
	wait, err := queryWait(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	deadline := time.Now().Add(wait)
	a := s.accessOf(r)
	for {
		wt, err := s.sched.Watch(id)
		if err == nil {
			err = a.mayTouch(&wt.Info.Job, true)
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if deletedOutput(w, wt.Info) {
			return
		}
		data, next, size, err := wt.Read(offset, limit)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if wt.Done && size < wt.Info.LogBytes {
			// The file shrank or went since the record was read: its
			// output may have been deleted just now.
			if info, err := s.sched.Job(id); err == nil && deletedOutput(w, info) {
				return
			}
		}
		if wt.Done && offset > size {
			s.fail(w, r, fieldErr("offset", "%d is past the end of the output (%d bytes)", offset, size))
			return
		}
		again := false
		if len(data) == 0 && !wt.Done {
			again, err = s.waitChange(r, deadline, wt.OutputChanged, wt.JobChanged)
			if err != nil {
				s.fail(w, r, err)
				return
			}
		}
		if again {
			continue
		}
		h := w.Header()
		done := wt.Done && next >= size
		h.Set(api.HeaderLogOffset, strconv.FormatInt(offset, 10))
		h.Set(api.HeaderLogNext, strconv.FormatInt(next, 10))
		h.Set(api.HeaderLogSize, strconv.FormatInt(size, 10))
		h.Set(api.HeaderJobState, string(wt.Info.State))
		h.Set(api.HeaderLogDone, strconv.FormatBool(done))
		if !wantsRaw(r) {
			s.writeLogsJSON(w, wt.Info, offset, next, size, done, data)
			return
		}
		h.Set("Content-Type", api.RawOutput)
		h.Set("Content-Length", strconv.Itoa(len(data)))
		w.WriteHeader(http.StatusOK)
		w.Write(data)
		return
	}
}

// handleResult is GET /result/<id>?wait=: the job's record, once it is
// done or wait runs out, whichever is first. Clients that want to wait
// longer ask again; the record's state says whether it is final.
func (s *Server) handleResult(w http.ResponseWriter, r *http.Request) {
	id, err := s.resolve("job id", r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	wait, err := queryWait(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	deadline := time.Now().Add(wait)
	a := s.accessOf(r)
	for {
		wt, err := s.sched.Watch(id)
		if err == nil {
			err = a.mayTouch(&wt.Info.Job, true)
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if !wt.Done {
			again, err := s.waitChange(r, deadline, wt.JobChanged, nil)
			if err != nil {
				s.fail(w, r, err)
				return
			}
			if again {
				continue
			}
		}
		writeJSON(w, http.StatusOK, s.view(wt.Info))
		return
	}
}

// deletedOutput answers 410 Gone for a job whose output was deleted to
// keep all output within its budget, saying so; it reports whether it did.
// The record stays, so the answer points to it.
func deletedOutput(w http.ResponseWriter, info scheduler.JobInfo) bool {
	if info.OutputDeletedAt.IsZero() {
		return false
	}
	writeError(w, http.StatusGone, fmt.Sprintf("the output of job %s (%d bytes) was deleted at %s to keep all jobs' output within "+
		"TT_DEVICE_MAX_OUTPUT_BYTES (the oldest finished jobs' output goes first); its record remains: GET /job/%s",
		info.ID, info.LogBytes, info.OutputDeletedAt.UTC().Format(time.RFC3339), info.ID))
	return true
}
