package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/scheduler"
	"github.com/ttkit/ttkit/queued/store"
)

// jobHandlers answer about the jobs there are: one job's record (GET
// /job), stopping one (POST /kill) and listing them (GET /jobs).
type jobHandlers struct {
	*base
	views *pythonViews
}

// handleJob is GET /job/<id>: the whole record, or with brief=1 the
// record as GET /jobs lists it, which costs the same whatever the job's
// command and environment take (what a client waiting for the job asks
// every second or two).
func (h *jobHandlers) handleJob(w http.ResponseWriter, r *http.Request) {
	brief, err := queryBool(r, "brief")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	info, err := h.jobFor(r, "job id", r.PathValue("id"), true)
	if err == nil && !brief {
		info, err = h.sched.Record(info.ID) // whole: its command and environment from the store
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, h.views.view(info))
}

// handleKill is POST /kill: the job job_id names, or, without one, the
// caller's running job (see runningOf), as the Python tt-device-queue's
// kill without an id stops the running job.
func (h *jobHandlers) handleKill(w http.ResponseWriter, r *http.Request) {
	fields, err := readBody(w, r, killRequestFields)
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
	var card *int
	if dev, ok := fields["device_id"]; ok && !isNull(dev) {
		n, err := parseDevice(dev, h.sched.Cards())
		if err != nil {
			h.fail(w, r, err)
			return
		}
		card = &n
	}
	if strings.TrimSpace(raw) == "" {
		running, others, err := h.runningOf(r, card, clientID)
		switch {
		case errors.Is(err, errSeveralRunning):
			writeError(w, http.StatusConflict, err.Error())
			return
		case err != nil:
			h.fail(w, r, err)
			return
		case running == nil:
			a := h.rules.of(r)
			none := api.NothingRunning{Error: api.NothingRunningMessage, Running: make([]api.Job, len(others))}
			for i, o := range others {
				none.Running[i] = h.views.view(o)
				redact(a, &none.Running[i], &others[i].Job)
			}
			writeJSON(w, http.StatusOK, none)
			return
		}
		raw = running.ID
	}
	rec, err := h.jobFor(r, "job_id", raw, false)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	info, err := h.sched.Kill(rec.ID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	j := h.views.view(info)
	j.Killed = killed(info)
	writeJSON(w, http.StatusOK, j)
}

// errSeveralRunning refuses a kill without a job id that fits several
// running jobs (409).
var errSeveralRunning = errors.New("several running jobs")

// runningOf picks the caller's running job for POST /kill without a job
// id: the running jobs (on card when not nil) that are the caller's (on a
// shared daemon those it submitted; on a user daemon every job is its
// user's), narrowed by clientID when that leaves exactly one. It returns
// the choice, or none and the running jobs that are not the caller's, or
// errSeveralRunning naming the candidates.
func (h *jobHandlers) runningOf(r *http.Request, card *int, clientID string) (*scheduler.JobInfo, []scheduler.JobInfo, error) {
	all, err := h.sched.List(scheduler.ListFilter{Card: card, State: store.StateRunning, Limit: api.MaxListLimit})
	if err != nil {
		return nil, nil, err
	}
	a := h.rules.of(r)
	var mine, others []scheduler.JobInfo
	for _, j := range all {
		switch {
		case j.Kind == store.KindReset:
		case a.owned(&j.Job):
			mine = append(mine, j)
		default:
			others = append(others, j)
		}
	}
	if len(mine) > 1 && clientID != "" {
		var same []scheduler.JobInfo
		for _, j := range mine {
			if j.ClientID == clientID {
				same = append(same, j)
			}
		}
		if len(same) == 1 {
			mine = same
		}
	}
	switch len(mine) {
	case 0:
		return nil, others, nil
	case 1:
		return &mine[0], nil, nil
	}
	names := make([]string, len(mine))
	for i, j := range mine {
		names[i] = fmt.Sprintf("%s on card %d (%s)", j.ID, j.Card(), strconv.Quote(cut(j.Cmd, 60)))
	}
	return nil, nil, fmt.Errorf("%w: %d running jobs are yours: %s; name one with job_id, or narrow it with device_id or client_id",
		errSeveralRunning, len(mine), strings.Join(names, ", "))
}

// handleList answers GET /jobs?device_id=&state=&client_id=&mine=&limit=.
func (h *jobHandlers) handleList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := scheduler.ListFilter{ClientID: q.Get("client_id")}
	if len(f.ClientID) > api.MaxClientIDBytes {
		h.fail(w, r, fieldErr("client_id", "longer than %d bytes", api.MaxClientIDBytes))
		return
	}
	switch q.Get("mine") {
	case "", "0":
	case "1":
		h.rules.mine(r, &f)
	default:
		h.fail(w, r, fieldErr("mine", "%q: want 1 or 0", cut(q.Get("mine"), 40)))
		return
	}
	if v := q.Get("device_id"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			h.fail(w, r, fieldErr("device_id", "%q is not a card number", cut(v, 40)))
			return
		}
		f.Card = &n
	}
	switch st := store.State(q.Get("state")); st {
	case "", store.StateQueued, store.StateRunning, store.StateDone:
		f.State = st
	default:
		h.fail(w, r, fieldErr("state", "%q: want queued, running or done", cut(string(st), 40)))
		return
	}
	switch k := store.Kind(q.Get("kind")); k {
	case "", store.KindJob, store.KindReset, store.KindHold:
		f.Kind = k
	default:
		h.fail(w, r, fieldErr("kind", "%q: want job, reset or hold", cut(string(k), 40)))
		return
	}
	if v := q.Get("slurm_job_id"); v != "" {
		if len(v) > api.MaxSlurmJobIDBytes {
			h.fail(w, r, fieldErr("slurm_job_id", "longer than %d bytes", api.MaxSlurmJobIDBytes))
			return
		}
		f.SlurmJobID, f.Kind = v, store.KindHold
	}
	if v := q.Get("array_id"); v != "" {
		if len(v) < api.MinIDPrefix || len(v) > store.IDLen || !store.IsHex(v) {
			h.fail(w, r, fieldErr("array_id", "%q: want an array id, or a prefix of at least %d of its hex digits", cut(v, 40), api.MinIDPrefix))
			return
		}
		f.ArrayID = v
	}
	limit, err := queryInt(r, "limit", api.DefaultListLimit, api.MaxListLimit)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	f.Limit = max(int(limit), 1)
	h.streamList(w, r, f)
}

// listChunk is how much of a list answer is gathered before it is
// written: the first chunk decides the status (an error before it is
// answered as one), the rest is written as it is read.
const listChunk = 32 << 10

// streamList answers GET /jobs with the jobs f selects as an api.JobList,
// encoding each as the scheduler hands it over (ListEach reads the
// finished ones a page at a time), so the answer to a thousand jobs costs
// a chunk of memory, not the whole list; each job is brief (a preview of
// its command, no environment: the whole record is one GET /job away). A
// store error once the answer has begun aborts the connection, so a
// client never takes a cut list for a whole one.
func (h *jobHandlers) streamList(w http.ResponseWriter, r *http.Request, f scheduler.ListFilter) {
	a := h.rules.of(r)
	var buf bytes.Buffer
	buf.WriteString(`{"jobs":[`)
	started, n := false, 0
	flush := func() error {
		if !started {
			started = true
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
		}
		_, err := w.Write(buf.Bytes())
		buf.Reset()
		return err
	}
	err := h.sched.ListEach(f, func(info scheduler.JobInfo) error {
		j := h.views.view(info)
		redact(a, &j, &info.Job)
		b, err := json.Marshal(j)
		if err != nil {
			return err
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		buf.Write(b)
		n++
		if buf.Len() >= listChunk {
			return flush()
		}
		return nil
	})
	switch {
	case err != nil && !started:
		h.fail(w, r, err)
		return
	case err != nil:
		h.log.Warn("GET /jobs: cut off", "jobs_written", n, "err", err)
		panic(http.ErrAbortHandler)
	}
	buf.WriteString("]}\n")
	flush()
}
