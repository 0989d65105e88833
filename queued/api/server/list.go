package server

import (
	"net/http"
	"strconv"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/scheduler"
	"github.com/ttkit/ttkit/queued/store"
)

// handleList answers GET /jobs?device_id=&state=&client_id=&mine=&limit=.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := scheduler.ListFilter{ClientID: q.Get("client_id")}
	if len(f.ClientID) > 256 {
		s.fail(w, r, fieldErr("client_id", "longer than 256 bytes"))
		return
	}
	switch q.Get("mine") {
	case "", "0":
	case "1":
		if s.cfg.Shared {
			// The caller's jobs are those the kernel says it submitted,
			// whatever client id they carry.
			uid := callerOf(r).uid
			f.OwnerUID, f.ClientID = &uid, ""
		}
	default:
		s.fail(w, r, fieldErr("mine", "%q: want 1 or 0", cut(q.Get("mine"), 40)))
		return
	}
	if v := q.Get("device_id"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			s.fail(w, r, fieldErr("device_id", "%q is not a card number", cut(v, 40)))
			return
		}
		f.Card = &n
	}
	switch st := store.State(q.Get("state")); st {
	case "", store.StateQueued, store.StateRunning, store.StateDone:
		f.State = st
	default:
		s.fail(w, r, fieldErr("state", "%q: want queued, running or done", cut(string(st), 40)))
		return
	}
	limit, err := queryInt(r, "limit", 50, api.MaxListLimit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f.Limit = max(int(limit), 1)
	infos, err := s.sched.List(f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.JobList{Jobs: make([]api.Job, len(infos))}
	a := s.accessOf(r)
	for i, info := range infos {
		out.Jobs[i] = s.view(info)
		redact(a, &out.Jobs[i], &infos[i].Job)
	}
	writeJSON(w, http.StatusOK, out)
}
