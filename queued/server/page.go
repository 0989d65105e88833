package server

import (
	"embed"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

// statusPage serves what the status page reads, and the CLI's status too:
// GET /status, the page's own files, and GET /changes, the long-poll that
// tells the page when to read GET /status again.
type statusPage struct {
	*base
	views *pythonViews
	// slots and conns are the handler and connection limits GET /status
	// shows at work.
	slots   *slots
	streams *streams
	conns   *conns
	version string
}

// handleStatus is GET /status.
func (p *statusPage) handleStatus(w http.ResponseWriter, r *http.Request) {
	sched := p.sched.Status()
	st := statusView(sched)
	st.PythonStatus = p.views.pythonStatus(sched, time.Now())
	st.Version = p.version
	st.Mode, st.Caller = p.rules.mode, p.rules.callerView(r)
	st.HTTP = api.HTTPStatus{Workers: p.slots.max, Busy: int(p.slots.busy.Load()), Waiting: int(p.slots.waiting.Load()),
		LongPolls: int(p.slots.polling.Load()), Conns: p.conns.count(), MaxConns: p.conns.max,
		Evicted: p.conns.evicted.Load(), Refused: p.conns.refused.Load(), AnsweredEarly: p.conns.early.Load(),
		ConnsPerUser: p.conns.perUser, WorkersPerUser: p.slots.perUser, WaitsPerUser: p.slots.waitsPerUser,
		ReservedConns: p.conns.reserve, ReservedWorkers: p.slots.reserve,
		Streams: int(p.streams.open.Load()), StreamsBusy: int(p.streams.work.busy.Load()), StreamsRefused: p.streams.refused.Load()}
	if p.rules.shared() {
		// Whose output fills the budget, and each user's bounds: only a
		// shared daemon has more than one user.
		st.MaxQueuedPerUser, st.MaxCompletedPerUser = p.sched.MaxQueuedPerUser(), p.sched.MaxCompletedPerUser()
		for _, u := range sched.Output.Top {
			st.Output.Users = append(st.Output.Users, api.UserOutput{UID: u.UID, User: userName(u.UID), Bytes: u.Bytes})
		}
	} else {
		st.Output.MaxBytesPerUser = 0
		st.HTTP.ConnsPerUser, st.HTTP.WorkersPerUser, st.HTTP.WaitsPerUser = 0, 0, 0
		st.HTTP.ReservedConns, st.HTTP.ReservedWorkers = 0, 0
	}
	writeJSON(w, http.StatusOK, st)
}

// The live status page: static HTML, CSS and JavaScript embedded in the
// binary, so it works offline and needs no build step. The files carry
// no data; the script reads the token from the URL fragment (which never
// reaches the server), keeps it in sessionStorage and sends it as the
// bearer token to GET /status, /changes and /logs, which all need it.
//
//go:embed web/index.html web/app.js web/style.css web/favicon.svg
var webFiles embed.FS

// pageCSP is the Content-Security-Policy of the page's files: scripts,
// styles and requests from queued itself only, no inline script or style,
// no frames, no forms, no plugins.
const pageCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// pageAssets maps the page's paths to its embedded files and their types.
var pageAssets = map[string][2]string{
	"/":            {"web/index.html", "text/html; charset=utf-8"},
	"/app.js":      {"web/app.js", "text/javascript; charset=utf-8"},
	"/style.css":   {"web/style.css", "text/css; charset=utf-8"},
	"/favicon.svg": {"web/favicon.svg", "image/svg+xml"},
}

// servePage answers a GET or HEAD of one of the page's static files and
// reports whether it did. It runs after the Host and Origin checks but
// before the token check: a browser must load the page before the page
// can send the token, and the files hold nothing but code.
func (p *statusPage) servePage(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	asset, ok := pageAssets[r.URL.Path]
	if !ok || r.URL.RawQuery != "" {
		return false
	}
	body, err := webFiles.ReadFile(asset[0])
	if err != nil {
		p.fail(w, r, fmt.Errorf("reading the embedded %s: %w", asset[0], err))
		return true
	}
	h := w.Header()
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Content-Type", asset[1])
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		w.Write(body) // the client went away if this fails; nothing to do
	}
	return true
}

// changesResponse answers GET /changes.
type changesResponse struct {
	// Gen is the scheduler's change generation; pass it back as since=.
	Gen uint64 `json:"gen"`
}

// handleChanges is GET /changes?since=&wait=: the status page's
// long-poll. It answers at once with the current generation when since
// is absent or differs from it, else when the next change comes or wait
// (at most api.MaxWait) runs out; meanwhile it holds no handler slot. The
// page then reads GET /status. Holders outside the queue are scanned,
// not notified, so the page asks again after a wait without a change.
func (p *statusPage) handleChanges(w http.ResponseWriter, r *http.Request) {
	var since uint64
	hasSince := r.URL.Query().Has("since")
	if hasSince {
		v := r.URL.Query().Get("since")
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			p.fail(w, r, fieldErr("since", "%q is not a change generation (a non-negative whole number from an earlier answer)", cut(v, 40)))
			return
		}
		since = n
	}
	wait, err := queryWait(r)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	deadline := time.Now().Add(wait)
	for {
		gen, changed := p.sched.Changes()
		if !hasSince || gen != since {
			writeJSON(w, http.StatusOK, changesResponse{Gen: gen})
			return
		}
		again, err := p.slots.wait(r, deadline, changed, nil)
		if err != nil {
			p.fail(w, r, err)
			return
		}
		if !again {
			writeJSON(w, http.StatusOK, changesResponse{Gen: gen})
			return
		}
	}
}
