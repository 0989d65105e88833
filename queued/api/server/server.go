// Package server is queued's HTTP handler: one handler per endpoint, the
// request decoding that names the bad field, the handler-slot limit that
// long-polls give back while they wait, and the security checks (token,
// loopback Host, no foreign Origin, JSON POSTs). Requests and answers are
// the types of package api, which the client shares.
package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ttkit/ttkit/queued/api"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ttkit/ttkit/queued/scheduler"
)

// slotWait is how long a request waits for a free handler before 503.
const slotWait = 30 * time.Second

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
	// made durable.
	Workers int
	// Version is the daemon's build, shown in GET /status.
	Version string
	// ListenAddr is the TCP address the daemon listens on, which GET
	// /proof binds its answer to (see api.VerifyServer).
	ListenAddr string
	// AllowPeer decides who may use the queue over a Unix socket, from the
	// caller's kernel credentials; default SameUser.
	AllowPeer func(Peer) error
	// Shared (system mode) serves every user of the host: each job belongs
	// to the user who submitted it (the socket's SO_PEERCRED uid), and
	// only that user and admins may see its record and output or stop it;
	// a non-admin's reset does not interrupt another user's job, and the
	// working directory of a submission is checked when the job starts,
	// as its user, not by queued.
	Shared bool
	// AdminGID is the group whose members are admins on a shared daemon
	// (TT_DEVICE_ADMIN_GROUP), besides root; AdminGroup is its name, for
	// messages.
	AdminGID   *uint32
	AdminGroup string
	// MaxConns bounds the open connections (TT_DEVICE_HTTP_MAX_CONNS);
	// default DefaultMaxConns. See conns for what happens at the bound.
	MaxConns int
	// WriteTimeout is how long an answer may take to be written, from its
	// first byte (TT_DEVICE_HTTP_WRITE_TIMEOUT); default
	// DefaultWriteTimeout. A long-poll's wait comes before its answer, so
	// it is not counted.
	WriteTimeout time.Duration
	// ExtraHosts are Host names accepted besides the loopback names; the
	// daemon adds its listen address when told to bind a non-loopback one.
	ExtraHosts []string
	// Logger receives request errors; default slog.Default().
	Logger *slog.Logger
}

// Server is queued's HTTP handler.
type Server struct {
	cfg     Config
	sched   *scheduler.Scheduler
	log     *slog.Logger
	slots   chan struct{}
	busy    atomic.Int64
	waiting atomic.Int64
	polling atomic.Int64 // long-polls waiting without a slot
	closing chan struct{}
	closed  atomic.Bool
	// active counts requests being handled and last is when one last
	// began or ended (Unix ns), for IdleFor.
	active      atomic.Int64
	last        atomic.Int64
	mux         *http.ServeMux
	conns       *conns
	recent      recentCache  // the Python tool's /status "recent" (python.go)
	stuckProbes atomic.Int64 // working-directory looks past their timeout; see probeDir
}

// NewServer returns the handler for the queued API.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Scheduler == nil || cfg.Token == "" {
		return nil, errors.New("api: Scheduler and Token are required")
	}
	if cfg.Workers < 1 {
		cfg.Workers = 16
	}
	if cfg.MaxRequestBytes < 1 {
		cfg.MaxRequestBytes = 1 << 20
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = 86400 * time.Second
	}
	if cfg.MaxConns < 1 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.AllowPeer == nil {
		cfg.AllowPeer = SameUser
	}
	s := &Server{cfg: cfg, sched: cfg.Scheduler, log: cfg.Logger,
		slots: make(chan struct{}, cfg.Workers), closing: make(chan struct{}), conns: newConns(cfg.MaxConns)}
	m := http.NewServeMux()
	m.HandleFunc("/queue", s.only(http.MethodPost, s.handleQueue))
	m.HandleFunc("/kill", s.only(http.MethodPost, s.handleKill))
	m.HandleFunc("/resubmit", s.only(http.MethodPost, s.handleResubmit))
	m.HandleFunc("/status", s.only(http.MethodGet, s.handleStatus))
	m.HandleFunc("/job/{id}", s.only(http.MethodGet, s.handleJob))
	m.HandleFunc("/jobs", s.only(http.MethodGet, s.handleList))
	m.HandleFunc("/logs/{id}", s.only(http.MethodGet, s.handleLogs))
	m.HandleFunc("/result/{id}", s.only(http.MethodGet, s.handleResult))
	m.HandleFunc("/reset", s.only(http.MethodPost, s.handleReset))
	m.HandleFunc("/changes", s.only(http.MethodGet, s.handleChanges)) // the status page's long-poll; page.go
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s", cut(r.URL.Path, 100)))
	})
	s.mux = m
	return s, nil
}

// Close makes waiting long-polls answer at once; call it before
// http.Server.Shutdown so shutdown does not wait for them.
func (s *Server) Close() {
	if s.closed.CompareAndSwap(false, true) {
		close(s.closing)
	}
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

// NewHTTPServer wraps the handler in an http.Server with timeouts that
// suit long-polls: headers must arrive within 10s and bodies within 30s,
// an answer must be written within WriteTimeout of its first byte, but a
// long-poll may wait up to api.MaxWait before it answers. Its hooks keep
// the open connections within MaxConns.
func (s *Server) NewHTTPServer() *http.Server {
	return &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return s.conns.context(ConnContext(ctx, c), c)
		},
		ConnState: s.conns.hook,
		ErrorLog:  slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		// "OPTIONS *" would otherwise get net/http's own empty 200
		// before any check; ServeHTTP refuses it like any unknown path.
		DisableGeneralOptionsHandler: true,
	}
}

// ServeHTTP checks, in order, Host, Origin, the token (over TCP; the
// caller's credentials on a Unix socket), that the path is
// canonical, that the body is not content-encoded and (for POST) the
// content type, all before the request may take a handler slot, so a
// refused request costs nothing and causes nothing. The slot is given
// back when the answer starts, which must then be written within
// WriteTimeout.
func (s *Server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	s.active.Add(1)
	s.last.Store(time.Now().UnixNano())
	defer func() {
		s.last.Store(time.Now().UnixNano())
		s.active.Add(-1)
	}()
	refused := s.conns.enter(r)
	sl := &slot{s: s}
	aw := &answerWriter{ResponseWriter: rw, rc: http.NewResponseController(rw), slot: sl, timeout: s.cfg.WriteTimeout}
	// The deadline of the connection's previous answer must not cut this
	// one; nothing is written until the answer starts.
	aw.rc.SetWriteDeadline(time.Time{})
	var w http.ResponseWriter = aw
	if refused {
		s.conns.refuse(w)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if !s.hostAllowed(r.Host) {
		writeError(w, http.StatusForbidden, fmt.Sprintf("Host %q is not a loopback name; queued answers only requests addressed to localhost, 127.0.0.1 or [::1]", cut(r.Host, 100)))
		return
	}
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
		writeError(w, http.StatusForbidden, fmt.Sprintf("Origin %q is refused: queued takes no requests from web pages", cut(o, 100)))
		return
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		writeError(w, http.StatusForbidden, "cross-site requests are refused")
		return
	}
	if r.URL.Path == api.ProofPath {
		s.handleProof(w, r)
		return
	}
	if s.servePage(w, r) { // the status page's files; no data, so no token (page.go)
		return
	}
	if !s.authorize(w, r) {
		return
	}
	if p := r.URL.EscapedPath(); !canonicalPath(p) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s: queued's paths have no empty, . or .. segments and no trailing /", cut(p, 100)))
		return
	}
	if enc := contentEncoding(r.Header); enc != "" {
		w.Header().Set("Accept-Encoding", "identity")
		writeError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Encoding %q is not supported: send the body as it is (identity)", cut(enc, 40)))
		return
	}
	if r.Method == http.MethodPost {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			writeError(w, http.StatusUnsupportedMediaType, "POST bodies must be JSON with Content-Type: application/json")
			return
		}
		// A declared length over the limit is refused before a byte of the
		// body is read; a body that lies about its length, or is chunked,
		// is cut off by MaxBytesReader as it is read.
		if r.ContentLength > s.cfg.MaxRequestBytes {
			w.Header().Set("Connection", "close")
			s.fail(w, r, fmt.Errorf("%w: %d bytes declared, the limit is %d bytes (TT_DEVICE_MAX_REQUEST_BYTES)",
				errBodyTooLarge, r.ContentLength, s.cfg.MaxRequestBytes))
			return
		}
		// The unwrapped writer, so net/http closes the connection after a
		// body that was too large.
		r.Body = http.MaxBytesReader(rw, r.Body, s.cfg.MaxRequestBytes)
	}
	if err := sl.acquire(r.Context()); err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	defer sl.release()
	s.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), slotKey{}, sl)))
}

// canonicalPath reports whether p, the path as sent (still escaped), is
// one ServeMux routes as it is: absolute, with no empty, "." or ".."
// segment and no trailing slash, except "/" itself. ServeMux answers any
// other path with a 307 redirect to its cleaned form, which invites a
// client to send the same POST again somewhere else; ServeHTTP answers
// 404 instead. (Its other redirect, /tree to /tree/, needs a pattern
// ending in a slash, and the only one is "/".)
func canonicalPath(p string) bool {
	return strings.HasPrefix(p, "/") && path.Clean(p) == p
}

// contentEncoding returns the first content coding of the request other
// than identity, "" when there is none. The API takes bodies as they are:
// decoding gzip or the like would let a small request expand past
// TT_DEVICE_MAX_REQUEST_BYTES, and reading a coded body as JSON only gives
// a confusing error.
func contentEncoding(h http.Header) string {
	for _, v := range h.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return c
			}
		}
	}
	return ""
}

// hostAllowed accepts loopback names, with or without a port, and the
// configured extra hosts. This refuses DNS-rebinding pages, whose requests
// carry the attacker's host name.
func (s *Server) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	switch strings.ToLower(host) {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	for _, h := range s.cfg.ExtraHosts {
		if strings.EqualFold(h, host) {
			return true
		}
	}
	return false
}

// only refuses other methods with a JSON 405.
func (s *Server) only(method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method {
			w.Header().Set("Allow", method)
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, method))
			return
		}
		h(w, r)
	}
}

// slot is a request's claim on one of the Workers handler slots.
type slot struct {
	s    *Server
	held bool
}

type slotKey struct{}

func slotOf(r *http.Request) *slot {
	sl, _ := r.Context().Value(slotKey{}).(*slot)
	return sl
}

func (sl *slot) acquire(ctx context.Context) error {
	if sl.held {
		return nil
	}
	select {
	case sl.s.slots <- struct{}{}:
	default:
		sl.s.waiting.Add(1)
		t := time.NewTimer(slotWait)
		defer t.Stop()
		select {
		case sl.s.slots <- struct{}{}:
			sl.s.waiting.Add(-1)
		case <-t.C:
			sl.s.waiting.Add(-1)
			return fmt.Errorf("server busy: all %d handlers (TT_DEVICE_HTTP_WORKERS) stayed busy for %s", cap(sl.s.slots), slotWait)
		case <-ctx.Done():
			sl.s.waiting.Add(-1)
			return ctx.Err()
		}
	}
	sl.held = true
	sl.s.busy.Add(1)
	return nil
}

func (sl *slot) release() {
	if !sl.held {
		return
	}
	sl.held = false
	sl.s.busy.Add(-1)
	<-sl.s.slots
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

// fail maps an error to its status code: 400 bad field, 403 another
// user's job on a shared daemon, 404 unknown job,
// 409 ambiguous prefix, finished job or running reset, 413 body too
// large, 429 queue full, 503 persistence failing, stopping, card dead or
// no reset commands.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var fe *FieldError
	code := http.StatusInternalServerError
	switch {
	case errors.As(err, &fe), errors.Is(err, scheduler.ErrUnknownCard):
		code = http.StatusBadRequest
	case errors.Is(err, errBodyTooLarge):
		code = http.StatusRequestEntityTooLarge
	case errors.Is(err, scheduler.ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, ErrForbidden):
		code = http.StatusForbidden
	case errors.Is(err, scheduler.ErrAmbiguous), errors.Is(err, scheduler.ErrFinished), errors.Is(err, scheduler.ErrResetRunning),
		errors.Is(err, ErrConflict):
		code = http.StatusConflict
	case errors.Is(err, scheduler.ErrQueueFull):
		code = http.StatusTooManyRequests
	case errors.Is(err, scheduler.ErrPersistence), errors.Is(err, scheduler.ErrStopping), errors.Is(err, scheduler.ErrCardDead),
		errors.Is(err, scheduler.ErrNoControls):
		code = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "5")
	}
	if code == http.StatusInternalServerError {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeError(w, code, errorMessage(err))
}

// errorMessage words scheduler errors for people.
func errorMessage(err error) string {
	switch {
	case errors.Is(err, scheduler.ErrQueueFull):
		return "queue full: " + err.Error() + " (TT_DEVICE_MAX_QUEUED_JOBS); try again when some have run"
	case errors.Is(err, scheduler.ErrPersistence):
		return "refused, nothing changed: the store cannot be written (" + err.Error() + "); see /status"
	case errors.Is(err, scheduler.ErrStopping):
		return "not accepting jobs: queued is stopping"
	}
	return err.Error()
}

// tokenMatches compares an Authorization header with the token in
// constant time.
func tokenMatches(header, token string) bool {
	got, ok := strings.CutPrefix(header, "Bearer ")
	if !ok {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(token)) == 1
}
