package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/scheduler"
)

// jobWaits are the long-polls about one job: its output (GET /logs) and
// its end (GET /result). While one waits it holds no handler slot, so
// any number of followers never block submissions.
type jobWaits struct {
	*base
	views *pythonViews
	slots *slots
}

// watchFor is jobFor for a long-poll, taken again after every wait: the
// job's record with its change channels, once the caller may see it.
func (h *jobWaits) watchFor(a *access, id string) (scheduler.Watch, error) {
	wt, err := h.sched.Watch(id)
	if err == nil {
		err = a.mayTouch(&wt.Info.Job, true)
	}
	return wt, err
}

// handleLogs is GET /logs/<id>?offset=&limit=&wait=: up to limit bytes
// of output from offset. With wait, it answers as soon as there is output
// past offset or the job is over, or when wait runs out; meanwhile it
// holds no handler slot. The answer is the Python tt-device-queue's JSON
// unless the request asks for the raw bytes (wantsRaw); the X-Log-*
// headers come with both.
func (h *jobWaits) handleLogs(w http.ResponseWriter, r *http.Request) {
	id, err := h.resolve("job id", r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	offset, err := queryInt(r, "offset", 0, 1<<62)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	limit, err := queryInt(r, "limit", api.DefaultLogChunk, api.MaxLogChunk)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if limit == 0 {
		limit = api.DefaultLogChunk
	}
	wait, err := queryWait(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	deadline := time.Now().Add(wait)
	a := h.rules.of(r)
	for {
		wt, err := h.watchFor(a, id)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		if deletedOutput(w, wt.Info) {
			return
		}
		data, next, size, err := wt.Read(offset, limit)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		if wt.Done && size < wt.Info.LogBytes {
			// The file shrank or went since the record was read: its
			// output may have been deleted just now.
			if info, err := h.sched.Job(id); err == nil && deletedOutput(w, info) {
				return
			}
		}
		if wt.Done && offset > size {
			h.fail(w, r, fieldErr("offset", "%d is past the end of the output (%d bytes)", offset, size))
			return
		}
		again := false
		if len(data) == 0 && !wt.Done {
			again, err = h.slots.wait(r, deadline, wt.OutputChanged, wt.JobChanged)
			if err != nil {
				h.fail(w, r, err)
				return
			}
		}
		if again {
			continue
		}
		hd := w.Header()
		done := wt.Done && next >= size
		hd.Set(api.HeaderLogOffset, strconv.FormatInt(offset, 10))
		hd.Set(api.HeaderLogNext, strconv.FormatInt(next, 10))
		hd.Set(api.HeaderLogSize, strconv.FormatInt(size, 10))
		hd.Set(api.HeaderJobState, string(wt.Info.State))
		hd.Set(api.HeaderLogDone, strconv.FormatBool(done))
		if !wantsRaw(r) {
			h.views.writeLogsJSON(w, wt.Info, offset, next, size, done, data)
			return
		}
		hd.Set("Content-Type", api.RawOutput)
		hd.Set("Content-Length", strconv.Itoa(len(data)))
		w.WriteHeader(http.StatusOK)
		w.Write(data)
		return
	}
}

// handleResult is GET /result/<id>?wait=: the job's record, once it is
// done or wait runs out, whichever is first. Clients that want to wait
// longer ask again; the record's state says whether it is final.
func (h *jobWaits) handleResult(w http.ResponseWriter, r *http.Request) {
	id, err := h.resolve("job id", r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	wait, err := queryWait(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	deadline := time.Now().Add(wait)
	a := h.rules.of(r)
	for {
		wt, err := h.watchFor(a, id)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		if !wt.Done {
			again, err := h.slots.wait(r, deadline, wt.JobChanged, nil)
			if err != nil {
				h.fail(w, r, err)
				return
			}
			if again {
				continue
			}
		}
		writeJSON(w, http.StatusOK, h.views.view(wt.Info))
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
