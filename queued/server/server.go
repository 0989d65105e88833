// Package server is queued's HTTP handler. Server wires small parts, each
// with one job and a file of its own: admission (the checks in front of
// every request: Host, Origin, token or socket caller, JSON POSTs; with
// conns, the bound on open connections), slots (the handler limit that
// long-polls give back while they wait), accessRules (the daemon's mode,
// and who may do what to which job), submissions (POST /queue, POST
// /resubmit), jobHandlers (GET /job, POST /kill, GET /jobs), jobWaits (the
// GET /logs and GET /result long-polls), resets (POST /reset), statusPage
// (GET /status, the page's files and its GET /changes long-poll) and
// pythonViews (the Python tt-device-queue's keys). Requests and answers
// are the types of package api, which the client shares; the server reads
// a request's field names from them (decode.go).
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/defaults"
	"github.com/ttkit/ttkit/queued/scheduler"
)

// bodyReadTimeout bounds reading a request body, so a client that stops
// sending cannot hold a handler forever.
const bodyReadTimeout = 30 * time.Second

// Config configures a Server.
type Config struct {
	// Scheduler runs the jobs. Required.
	Scheduler *scheduler.Scheduler
	// Token is the bearer token every request must carry. Required.
	Token string
	// MaxTimeout is the largest timeout a submission may ask for.
	MaxTimeout time.Duration
	// MaxRequestBytes bounds a request body (413 beyond).
	MaxRequestBytes int64
	// Workers bounds the handlers working at once; a long-poll gives its
	// slot back while it waits, and a submission while its commit is
	// made durable. Default defaults.HTTPWorkers.
	Workers int
	// Version is the daemon's build, shown in GET /status.
	Version string
	// ListenAddr is the TCP address the daemon listens on, which GET
	// /proof binds its answer to (see api.VerifyServer).
	ListenAddr string
	// AllowPeer decides who may use the queue over a Unix socket, from the
	// caller's kernel credentials; default SameUser.
	AllowPeer func(Peer) error
	// Mode is the daemon's mode, user mode when empty. In system mode
	// the daemon is shared by every user of the host: each job belongs
	// to the user who submitted it (the socket's SO_PEERCRED uid), and
	// only that user and admins may see its record and output or stop it;
	// a non-admin's reset does not interrupt another user's job, and the
	// working directory of a submission is checked when the job starts,
	// as its user, not by queued. accessRules holds every rule that
	// differs.
	Mode api.Mode
	// AdminGID is the group whose members are admins on a shared daemon
	// (TT_DEVICE_ADMIN_GROUP), besides root; AdminGroup is its name, for
	// messages.
	AdminGID   *uint32
	AdminGroup string
	// MaxConns bounds the open connections (TT_DEVICE_HTTP_MAX_CONNS);
	// default defaults.HTTPMaxConns. See conns for what happens at the bound.
	MaxConns int
	// ConnsPerUser, WorkersPerUser and WaitsPerUser bound, for each user
	// outside the reserve (root, queued's own user and the admins; see
	// who), the open connections (TT_DEVICE_HTTP_MAX_CONNS_PER_USER;
	// default a quarter of MaxConns), the handlers working for them at
	// once (TT_DEVICE_HTTP_WORKERS_PER_USER; a quarter of Workers) and
	// their streams (long-polls) open at once, past which a stream is
	// refused (TT_DEVICE_HTTP_WAITS_PER_USER; half of ConnsPerUser; see
	// streams). On a user-mode daemon everyone is the
	// reserve, so only the totals apply.
	ConnsPerUser, WorkersPerUser, WaitsPerUser int
	// WriteTimeout is how long an answer may take to be written, from its
	// first byte (TT_DEVICE_HTTP_WRITE_TIMEOUT); default
	// defaults.HTTPWriteTimeoutSeconds. A long-poll's wait comes before its answer, so
	// it is not counted.
	WriteTimeout time.Duration
	// ExtraHosts are Host names accepted besides the loopback names; the
	// daemon adds its listen address when told to bind a non-loopback one.
	ExtraHosts []string
	// Logger receives request errors; default slog.Default().
	Logger *slog.Logger
}

// Server is queued's HTTP handler: it wires the parts and routes each
// request through admission to its handler.
type Server struct {
	cfg         Config
	log         *slog.Logger
	mux         *http.ServeMux
	admission   *admission
	slots       *slots
	streams     *streams
	submissions *submissions
	resets      *resets
	holds       *holds
	gates       *gates
	page        *statusPage
	login       *pageLogin
	// active counts requests being handled and last is when one last
	// began or ended (Unix ns), for IdleFor.
	active atomic.Int64
	last   atomic.Int64
}

// NewServer returns the handler for the queued API.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Scheduler == nil || cfg.Token == "" {
		return nil, errors.New("api: Scheduler and Token are required")
	}
	mode, err := api.ParseMode(string(cfg.Mode))
	if err != nil {
		return nil, fmt.Errorf("api: Mode: %w", err)
	}
	cfg.Mode = mode
	if cfg.Workers < 1 {
		cfg.Workers = defaults.HTTPWorkers
	}
	if cfg.MaxRequestBytes < 1 {
		cfg.MaxRequestBytes = api.DefaultMaxRequestBytes
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = api.DefaultMaxTimeoutSeconds * time.Second
	}
	if cfg.MaxConns < 1 {
		cfg.MaxConns = defaults.HTTPMaxConns
	}
	if cfg.ConnsPerUser < 1 {
		cfg.ConnsPerUser = defaults.Share(cfg.MaxConns)
	}
	if cfg.WorkersPerUser < 1 {
		cfg.WorkersPerUser = defaults.Share(cfg.Workers)
	}
	if cfg.WaitsPerUser < 1 {
		cfg.WaitsPerUser = defaults.Waits(cfg.ConnsPerUser)
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = defaults.HTTPWriteTimeoutSeconds * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.AllowPeer == nil {
		cfg.AllowPeer = SameUser
	}
	b := &base{sched: cfg.Scheduler, log: cfg.Logger,
		rules: &accessRules{mode: cfg.Mode, adminGID: cfg.AdminGID, adminGroup: cfg.AdminGroup}}
	views := &pythonViews{sched: cfg.Scheduler}
	rr := &reserveRule{rules: b.rules}
	cs := newConns(cfg.MaxConns, cfg.ConnsPerUser, rr.reserved)
	login := newPageLogin(b)
	sl := newSlots(cfg.Workers, cfg.WorkersPerUser, cfg.WaitsPerUser, cs)
	// The streams' handlers are as many as the short requests', and apart
	// from them: a stream never takes a slot a status or a submission needs.
	st := newStreams(cfg.WaitsPerUser, newSlots(cfg.Workers, cfg.WorkersPerUser, cfg.WaitsPerUser, cs))
	s := &Server{cfg: cfg, log: cfg.Logger, slots: sl, streams: st,
		admission: &admission{base: b, token: cfg.Token, listenAddr: cfg.ListenAddr, allowPeer: cfg.AllowPeer,
			extraHosts: cfg.ExtraHosts, pageTokens: login.codes, maxBody: cfg.MaxRequestBytes, writeTimeout: cfg.WriteTimeout, conns: cs, slots: sl, streams: st},
		submissions: &submissions{base: b, maxTimeout: cfg.MaxTimeout, cwd: &cwdProber{}},
		resets:      &resets{base: b},
		holds:       &holds{base: b, maxTimeout: cfg.MaxTimeout},
		gates:       &gates{base: b},
		page:        &statusPage{base: b, views: views, slots: sl, streams: st, conns: cs, version: cfg.Version},
		login:       login,
	}
	jobs := &jobHandlers{base: b, views: views}
	waits := &jobWaits{base: b, views: views, slots: sl}
	m := http.NewServeMux()
	m.HandleFunc("/queue", only(http.MethodPost, s.submissions.handleQueue))
	m.HandleFunc("/kill", only(http.MethodPost, jobs.handleKill))
	m.HandleFunc("/resubmit", only(http.MethodPost, s.submissions.handleResubmit))
	m.HandleFunc("/status", only(http.MethodGet, s.page.handleStatus))
	m.HandleFunc("/job/{id}", only(http.MethodGet, jobs.handleJob))
	m.HandleFunc("/jobs", only(http.MethodGet, jobs.handleList))
	m.HandleFunc("/logs/{id}", only(http.MethodGet, waits.handleLogs))
	m.HandleFunc("/result/{id}", only(http.MethodGet, waits.handleResult))
	m.HandleFunc("/reset", only(http.MethodPost, s.resets.handleReset))
	m.HandleFunc("/hold", only(http.MethodPost, s.holds.handleHold))
	m.HandleFunc("/release", only(http.MethodPost, s.holds.handleRelease))
	m.HandleFunc(api.GatePath, only(http.MethodPost, s.gates.handleGate))
	m.HandleFunc("/changes", only(http.MethodGet, s.page.handleChanges))
	m.HandleFunc(api.PageCodePath, only(http.MethodPost, s.login.handleCode))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s", cut(r.URL.Path, 100)))
	})
	s.mux = m
	return s, nil
}

// Close makes waiting long-polls answer at once; call it before
// http.Server.Shutdown so shutdown does not wait for them.
func (s *Server) Close() {
	s.slots.close()
	s.streams.work.close()
}

// IdleFor is how long no request has been in progress: 0 while one is.
// A stopping daemon waits for a moment of quiet, so the clients that were
// waiting for the jobs it interrupted can ask for their final records
// before the listeners close.
func (s *Server) IdleFor() time.Duration {
	if s.active.Load() > 0 {
		return 0
	}
	return time.Since(time.Unix(0, s.last.Load()))
}

// RestingFor is how long no request has been worked on: 0 while one is.
// Unlike IdleFor, long-polls waiting (a status page left open, a logs -f)
// do not count: queued is at rest while they wait.
func (s *Server) RestingFor() time.Duration {
	return min(s.slots.restingFor(), s.streams.work.restingFor())
}

// NewHTTPServer wraps the handler in an http.Server with timeouts that
// suit long-polls: headers must arrive within 10s and bodies within 30s,
// an answer must be written within WriteTimeout of its first byte, but a
// long-poll may wait up to api.MaxWait before it answers. Its hooks keep
// the open connections within MaxConns.
func (s *Server) NewHTTPServer() *http.Server {
	cs := s.admission.conns
	return &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return cs.context(ConnContext(ctx, c), c)
		},
		ConnState: cs.hook,
		ErrorLog:  slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		// "OPTIONS *" would otherwise get net/http's own empty 200
		// before any check; ServeHTTP refuses it like any unknown path.
		DisableGeneralOptionsHandler: true,
	}
}

// ServeHTTP checks, in order, Host, Origin, the token (over TCP; the
// caller's credentials on a Unix socket), that the path is canonical,
// that the body is not content-encoded and (for POST) the content type,
// all before the request may take a handler slot, so a refused request
// costs nothing and causes nothing (admission). GET /proof, the status
// page's files and its code exchange come before the token: they need
// none. The slot is given
// back when the answer starts, which must then be written within
// WriteTimeout.
func (s *Server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	s.active.Add(1)
	s.last.Store(time.Now().UnixNano())
	defer func() {
		s.last.Store(time.Now().UnixNano())
		s.active.Add(-1)
	}()
	w, sl, ok := s.admission.admit(rw, r)
	defer s.admission.conns.finished(w, r)
	if !ok {
		return
	}
	if r.URL.Path == api.ProofPath {
		s.admission.handleProof(w, r)
		return
	}
	if r.URL.Path == api.PageSessionPath { // the page's one-time code, for a page token (pagecode.go)
		s.login.handleSession(w, r)
		return
	}
	if s.page.servePage(w, r) { // the status page's files; no data, so no token (page.go)
		return
	}
	if !s.admission.authorize(w, r) || !s.admission.checkRequest(w, rw, r) || !s.admission.readBody(w, rw, r) {
		return
	}
	if isStream(r) {
		end, err := s.streams.begin(whoIs(r))
		if err != nil {
			s.admission.conns.closeAfter(w, r)
			s.admission.busy(w, err)
			return
		}
		defer end()
	}
	if err := sl.acquire(r.Context()); err != nil {
		s.admission.busy(w, err)
		return
	}
	defer sl.release()
	s.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), slotKey{}, sl)))
}

// only refuses other methods with a JSON 405.
func only(method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method {
			w.Header().Set("Allow", method)
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, method))
			return
		}
		h(w, r)
	}
}

// writeJSON answers with a JSON body.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v) // the client went away if this fails; nothing to do
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, api.ErrorResponse{Error: msg})
}
