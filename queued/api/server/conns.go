package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxConns is the default bound on open connections
// (TT_DEVICE_HTTP_MAX_CONNS): far above what the CLI and a few scripts
// keep open, far below the daemon's file descriptor limit, which its job
// output files need too.
const DefaultMaxConns = 256

// DefaultWriteTimeout is the default time an answer may take to be written
// from its first byte (TT_DEVICE_HTTP_WRITE_TIMEOUT). Answers are at most
// about a MiB, so only a client that stops reading hits it.
const DefaultWriteTimeout = 30 * time.Second

// conns tracks the open connections, through the http.Server's ConnState
// and ConnContext hooks, and keeps them within the bound: a connection
// over the bound closes the one that has waited longest outside a handler
// (an idle keep-alive connection, or one that has not finished sending its
// request headers, such as a slowloris client). When every open
// connection is inside a handler, the new one's request is answered 503
// and the connection closed; past MaxConns such refused connections still
// waiting for their request, a new one is closed at once. Connections are
// never left waiting in the kernel's accept queue, so a client is either
// served or told why not at once.
type conns struct {
	max int

	mu   sync.Mutex
	open map[net.Conn]*connInfo

	evicted, refused atomic.Int64
}

// connInfo is one open connection's place in its life, guarded by conns.mu.
type connInfo struct {
	state   http.ConnState
	serving bool      // inside Server.ServeHTTP (a request, or its answer being written)
	closing bool      // closed (or refused) to keep the bound; not counted
	refused bool      // over the bound with every other one busy: answer 503 and close
	since   time.Time // when it last entered its state, or left a handler
}

type connKey struct{}

func newConns(max int) *conns {
	return &conns{max: max, open: map[net.Conn]*connInfo{}}
}

// context is the http.Server's ConnContext: it registers the connection and
// gives its requests a handle on it.
func (cs *conns) context(ctx context.Context, c net.Conn) context.Context {
	info := &connInfo{state: http.StateNew, since: time.Now()}
	cs.mu.Lock()
	cs.open[c] = info
	cs.mu.Unlock()
	return context.WithValue(ctx, connKey{}, info)
}

// hook is the http.Server's ConnState hook.
func (cs *conns) hook(c net.Conn, state http.ConnState) {
	cs.mu.Lock()
	info := cs.open[c]
	switch state {
	case http.StateClosed, http.StateHijacked:
		delete(cs.open, c)
		cs.mu.Unlock()
		return
	}
	if info != nil {
		info.state, info.since = state, time.Now()
		if state == http.StateIdle {
			info.serving = false
		}
	}
	over := state == http.StateNew && cs.countLocked() > cs.max
	var victim net.Conn
	if over {
		victim = cs.victimLocked(c)
		switch {
		case victim != nil:
			cs.open[victim].closing = true
		case info != nil && cs.refusingLocked() < cs.max:
			info.closing, info.refused = true, true
		case info != nil:
			// As many refused connections wait to send their request as
			// may be open: close this one without an answer.
			info.closing = true
			victim = c
		}
	}
	cs.mu.Unlock()
	switch {
	case victim == c:
		cs.refused.Add(1)
		c.Close()
	case victim != nil:
		cs.evicted.Add(1)
		victim.Close()
	}
}

// refusingLocked counts refused connections whose request is still to be
// answered 503; they wait at most the header timeout.
func (cs *conns) refusingLocked() int {
	n := 0
	for _, info := range cs.open {
		if info.refused {
			n++
		}
	}
	return n
}

// victimLocked picks the connection other than c that has waited longest
// outside a handler; nil when every other one is inside a handler.
func (cs *conns) victimLocked(c net.Conn) net.Conn {
	var victim net.Conn
	var oldest time.Time
	for oc, info := range cs.open {
		if oc == c || info.serving || info.closing {
			continue
		}
		if victim == nil || info.since.Before(oldest) {
			victim, oldest = oc, info.since
		}
	}
	return victim
}

// enter marks the request's connection as inside a handler, until its
// answer is written (the connection turns idle) or it closes. It reports
// whether the connection was refused at the bound: its one request is
// answered 503 and the connection closed (net/http then closes it
// gracefully, so the client reads the answer rather than a reset).
func (cs *conns) enter(r *http.Request) (refused bool) {
	info, _ := r.Context().Value(connKey{}).(*connInfo)
	if info == nil {
		return false
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	info.serving = true
	if info.refused {
		info.refused = false
		cs.refused.Add(1)
		return true
	}
	return false
}

// refuse answers a request on a connection refused at the bound.
func (cs *conns) refuse(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, fmt.Sprintf(
		"too many connections: all %d (TT_DEVICE_HTTP_MAX_CONNS) are busy with requests; try again", cs.max))
}

// count is the number of open connections, not counting those already
// closed to keep the bound.
func (cs *conns) count() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.countLocked()
}

func (cs *conns) countLocked() int {
	n := 0
	for _, info := range cs.open {
		if !info.closing {
			n++
		}
	}
	return n
}

// answerWriter arms the write deadline when the answer starts and gives
// the handler slot back then: writing to a slow client is no work, and a
// client that stops reading then holds its connection until the deadline,
// never a handler.
type answerWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	slot    *slot
	timeout time.Duration
	started bool
}

func (a *answerWriter) start() {
	if a.started {
		return
	}
	a.started = true
	a.rc.SetWriteDeadline(time.Now().Add(a.timeout))
	a.slot.release()
}

// WriteHeader starts the answer.
func (a *answerWriter) WriteHeader(code int) {
	a.start()
	a.ResponseWriter.WriteHeader(code)
}

// Write starts the answer if WriteHeader did not.
func (a *answerWriter) Write(p []byte) (int, error) {
	a.start()
	return a.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (a *answerWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }
