package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// ReserveShare sets the connections and handlers kept for the reserve:
// an eighth of the connections and a quarter of the handlers (at least
// one of each when there are two or more) are open to root, queued's own
// user and the admins alone, whatever the other users hold.
const (
	ConnReserveShare    = 8
	WorkersReserveShare = 4
)

// reserveOf is the share of total kept for the reserve: total/share, at
// least 1 when total is 2 or more, never all of it.
func reserveOf(total, share int) int {
	if total < 2 {
		return 0
	}
	return min(max(total/share, 1), total-1)
}

// who is the user behind a connection, as the kernel says (SO_PEERCRED on
// the socket; over TCP, where only a holder of the token gets in,
// queued's own user), and whether they belong to the reserve: root,
// queued's own user or, on a shared daemon, an admin. On a user-mode
// daemon everyone who may connect is its user or root, so everyone is
// the reserve and only the totals apply.
type who struct {
	uid      uint32
	reserved bool
}

// conns tracks the open connections, through the http.Server's ConnState
// and ConnContext hooks, and keeps them within their bounds: MaxConns in
// all, ConnsPerUser for each user outside the reserve, and MaxConns less
// the reserve for all of those users together. A connection over a bound
// makes room by closing, within the bound it broke, the connection that
// has waited longest outside a handler (an idle keep-alive connection, or
// one slow to send its request headers or body, such as a slowloris
// client); failing that, by answering at once the oldest long-poll of the
// user holding the most connections there (the answer says what there is
// now, as when its wait runs out, and closes its connection). Only when
// every connection there is working in a handler is the new one's request
// answered 503 and the connection closed; past MaxConns such refused
// connections still waiting for their request, a new one is closed at
// once. Connections are never left waiting in the kernel's accept queue,
// so a client is either served or told why not at once.
type conns struct {
	max, perUser, reserve int
	// reserved says whether a uid belongs to the reserve (see who).
	reserved func(uid uint32) bool

	mu   sync.Mutex
	open map[net.Conn]*connInfo
	// changed is closed, and replaced, whenever a connection closes,
	// leaves a handler or starts a long-poll: a refused one waiting for
	// room looks again then (see waitRoom).
	changed chan struct{}

	evicted, refused, early atomic.Int64
}

// connInfo is one open connection's place in its life, guarded by conns.mu.
type connInfo struct {
	who
	state   http.ConnState
	serving bool      // inside Server.ServeHTTP (a request, or its answer being written)
	reading bool      // in ServeHTTP, reading the request body: slow to send, like a slowloris
	closing bool      // closed (or refused, or its long-poll told to answer) to keep a bound; not counted
	refused string    // over a bound with every other one there busy: answer 503 with this, and close
	bound   string    // the setting of the bound it was refused at
	since   time.Time // when it last entered its state, or left a handler
	poll    *pollWait // the long-poll waiting on it, if any
}

// pollWait is a long-poll waiting for a change, without a handler slot.
type pollWait struct {
	since time.Time
	// early is closed to make the long-poll answer now with what it has.
	early chan struct{}
	told  bool
}

// tell makes the long-poll answer now; once.
func (p *pollWait) tell() {
	if !p.told {
		p.told = true
		close(p.early)
	}
}

type connKey struct{}

// newConns bounds the connections to max in all and perUser for each
// user outside the reserve; reserved classifies users.
func newConns(max, perUser int, reserved func(uint32) bool) *conns {
	return &conns{max: max, perUser: perUser, reserve: reserveOf(max, ConnReserveShare), reserved: reserved, open: map[net.Conn]*connInfo{},
		changed: make(chan struct{})}
}

// context is the http.Server's ConnContext: it registers the connection,
// with its user (ctx carries the socket's credentials, see ConnContext),
// and gives its requests a handle on it.
func (cs *conns) context(ctx context.Context, c net.Conn) context.Context {
	info := &connInfo{state: http.StateNew, since: time.Now(), who: cs.whoOf(ctx)}
	cs.mu.Lock()
	cs.open[c] = info
	cs.mu.Unlock()
	return context.WithValue(ctx, connKey{}, info)
}

// whoOf is the user behind a connection whose context is ctx.
func (cs *conns) whoOf(ctx context.Context) who {
	p, onSocket, err := PeerOf(ctx)
	switch {
	case !onSocket:
		return who{uid: uint32(os.Getuid()), reserved: true} // the token's holder: queued's own user
	case err != nil:
		return who{uid: nobody} // refused by authorize; counted as no one's
	}
	return who{uid: p.UID, reserved: cs.reserved(p.UID)}
}

// nobody is the uid a connection whose credentials could not be read
// counts as.
const nobody = ^uint32(0)

// infoOf is the connection a request came on; nil outside the hooks (a
// handler called directly).
func infoOf(r *http.Request) *connInfo {
	info, _ := r.Context().Value(connKey{}).(*connInfo)
	return info
}

// whoIs is the user behind a request: the reserve when its connection is
// not known.
func whoIs(r *http.Request) who {
	if info := infoOf(r); info != nil {
		return info.who
	}
	return who{uid: uint32(os.Getuid()), reserved: true}
}

// hook is the http.Server's ConnState hook.
func (cs *conns) hook(c net.Conn, state http.ConnState) {
	cs.mu.Lock()
	info := cs.open[c]
	switch state {
	case http.StateClosed, http.StateHijacked:
		delete(cs.open, c)
		cs.changeLocked()
		cs.mu.Unlock()
		return
	}
	var victim net.Conn
	if info != nil {
		info.state, info.since = state, time.Now()
		if state == http.StateIdle {
			info.serving = false
			cs.changeLocked()
		}
		if state == http.StateNew {
			victim = cs.admitLocked(c, info)
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

// admitLocked keeps the bounds when c, a new connection, opens: it
// returns the connection to close now (a victim, or c itself when even
// its refusal cannot wait), tells a long-poll to answer, or marks c
// refused; nil when nothing is to be closed.
func (cs *conns) admitLocked(c net.Conn, info *connInfo) net.Conn {
	within, why, bound := cs.overLocked(info)
	if within == nil {
		return nil
	}
	if victim, ok := cs.makeRoomLocked(c, within); ok {
		return victim
	}
	info.closing = true
	if cs.refusingLocked() < cs.max {
		info.refused, info.bound = why, bound
		return nil
	}
	// As many refused connections wait to send their request as may be
	// open: close this one without an answer.
	return c
}

// overLocked says which bound info's connection, counted, breaks: the
// connections a room is to be made among, and why; within is nil when it
// breaks none.
func (cs *conns) overLocked(info *connInfo) (within func(*connInfo) bool, why, bound string) {
	total, outside, mine := 0, 0, 0
	for _, o := range cs.open {
		if o.closing && o != info {
			continue
		}
		total++
		if !o.reserved {
			outside++
			if o.uid == info.uid {
				mine++
			}
		}
	}
	switch {
	case !info.reserved && mine > cs.perUser:
		return func(o *connInfo) bool { return !o.reserved && o.uid == info.uid },
			fmt.Sprintf("too many connections: uid %d has %d open, busy with requests, the most one user may have (TT_DEVICE_HTTP_MAX_CONNS_PER_USER); try again, or raise TT_DEVICE_HTTP_MAX_CONNS_PER_USER in queued's environment", info.uid, cs.perUser),
			"TT_DEVICE_HTTP_MAX_CONNS_PER_USER"
	case !info.reserved && outside > cs.max-cs.reserve:
		return func(o *connInfo) bool { return !o.reserved },
			fmt.Sprintf("too many connections: all %d open to users (TT_DEVICE_HTTP_MAX_CONNS less the %d kept for root and the admins) are busy with requests; try again, or raise TT_DEVICE_HTTP_MAX_CONNS in queued's environment", cs.max-cs.reserve, cs.reserve),
			"TT_DEVICE_HTTP_MAX_CONNS"
	case total > cs.max:
		return func(*connInfo) bool { return true },
			fmt.Sprintf("too many connections: all %d (TT_DEVICE_HTTP_MAX_CONNS) are busy with requests; try again, or raise TT_DEVICE_HTTP_MAX_CONNS in queued's environment", cs.max),
			"TT_DEVICE_HTTP_MAX_CONNS"
	}
	return nil, "", ""
}

// makeRoomLocked makes room among the connections within selects, other
// than c: it marks the one idle the longest to be closed (returned), or
// else tells the oldest long-poll of the user holding the most to
// answer; ok is false when every one of them is working in a handler.
func (cs *conns) makeRoomLocked(c net.Conn, within func(*connInfo) bool) (victim net.Conn, ok bool) {
	if victim := cs.idlestLocked(c, within); victim != nil {
		cs.open[victim].closing = true
		return victim, true
	}
	if p := cs.pollVictimLocked(c, within); p != nil {
		p.closing = true
		p.poll.tell()
		cs.early.Add(1)
		return nil, true
	}
	return nil, false
}

// refusingLocked counts refused connections whose request is still to be
// answered 503; they wait at most the header timeout.
func (cs *conns) refusingLocked() int {
	n := 0
	for _, info := range cs.open {
		if info.refused != "" {
			n++
		}
	}
	return n
}

// idlestLocked picks, among the connections within selects, the one
// other than c that has waited longest outside a handler (or reading its
// body); nil when every one of them is inside a handler.
func (cs *conns) idlestLocked(c net.Conn, within func(*connInfo) bool) net.Conn {
	var victim net.Conn
	var oldest time.Time
	for oc, info := range cs.open {
		if oc == c || (info.serving && !info.reading) || info.closing || !within(info) {
			continue
		}
		if victim == nil || info.since.Before(oldest) {
			victim, oldest = oc, info.since
		}
	}
	return victim
}

// pollVictimLocked picks, among the connections within selects, the
// oldest long-poll of the user holding the most of them; nil when none
// waits.
func (cs *conns) pollVictimLocked(c net.Conn, within func(*connInfo) bool) *connInfo {
	held := map[uint32]int{}
	for oc, info := range cs.open {
		if oc != c && !info.closing && within(info) {
			held[info.uid]++
		}
	}
	var victim *connInfo
	for oc, info := range cs.open {
		if oc == c || info.closing || info.poll == nil || info.poll.told || !within(info) {
			continue
		}
		if victim == nil || held[info.uid] > held[victim.uid] ||
			(held[info.uid] == held[victim.uid] && info.poll.since.Before(victim.poll.since)) {
			victim = info
		}
	}
	return victim
}

// enter marks the request's connection as inside a handler, until its
// answer is written (the connection turns idle) or it closes. It returns
// the refusal when the connection was refused at a bound: its one request
// is answered 503 and the connection closed (net/http then closes it
// gracefully, so the client reads the answer rather than a reset).
func (cs *conns) enter(r *http.Request) (refused *BusyError) {
	info := infoOf(r)
	if info == nil {
		return nil
	}
	cs.mu.Lock()
	info.serving = true
	waiting := info.refused != ""
	cs.mu.Unlock()
	if waiting && cs.waitRoom(r.Context(), info) {
		return nil
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if info.refused != "" {
		refused = &BusyError{Bound: info.bound, Msg: fmt.Sprintf("%s (waited %s for room)", info.refused, connWait)}
		info.refused = ""
		cs.refused.Add(1)
	}
	return refused
}

// reading marks the request's connection as reading its body (on) or
// done with it: while it reads, a slow sender may be closed to make room,
// as one slow to send its headers is.
func (cs *conns) reading(r *http.Request, on bool) {
	if info := infoOf(r); info != nil {
		cs.mu.Lock()
		info.reading = on
		if on {
			info.since = time.Now()
		}
		cs.mu.Unlock()
	}
}

// closingOf reports whether the request's connection is to close after
// its answer: its long-poll was told to answer to make room.
func (cs *conns) closingOf(info *connInfo) bool {
	if info == nil {
		return false
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return info.closing
}

// startPoll registers a long-poll waiting on the request's connection and
// returns the channel that closes when it must answer early: to make room
// for a new connection (see admitLocked), or because its user already has
// waitsPerUser long-polls waiting (outside the reserve), in which case
// their oldest answers now instead. The streams bound (see streams)
// refuses a user's stream past waitsPerUser before it gets here, so the
// latter is only a backstop.
func (cs *conns) startPoll(r *http.Request, waitsPerUser int) (early <-chan struct{}, done func()) {
	info := infoOf(r)
	p := &pollWait{since: time.Now(), early: make(chan struct{})}
	if info == nil {
		return p.early, func() {}
	}
	cs.mu.Lock()
	if !info.reserved {
		var oldest *pollWait
		n := 0
		for _, o := range cs.open {
			if o.poll != nil && !o.poll.told && !o.reserved && o.uid == info.uid {
				n++
				if oldest == nil || o.poll.since.Before(oldest.since) {
					oldest = o.poll
				}
			}
		}
		if n >= waitsPerUser && oldest != nil {
			oldest.tell()
			cs.early.Add(1)
		}
	}
	info.poll = p
	cs.changeLocked()
	cs.mu.Unlock()
	return p.early, func() {
		cs.mu.Lock()
		if info.poll == p {
			info.poll = nil
		}
		cs.mu.Unlock()
	}
}

// closeAfter marks the request's connection, refused at a bound after
// it entered (a stream past its user's bound), as closing after its
// answer: it no longer counts in the bounds, so refused streams asked
// again and again cannot crowd out their user's short requests. It counts
// as refused.
func (cs *conns) closeAfter(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Connection", "close")
	cs.refused.Add(1)
	if info := infoOf(r); info != nil {
		cs.mu.Lock()
		info.closing = true
		cs.changeLocked()
		cs.mu.Unlock()
	}
}

// finished is called as a request's handler returns: a connection that
// closes after this answer (the client or the answer said Connection:
// close) stops counting in the bounds now, not when net/http gets round
// to closing it, so a client that asks again on a new connection at once
// (a stream, a page load over HTTP/1.0) is not counted twice, and no
// newer connection of its user is closed to make room for the old one.
func (cs *conns) finished(w http.ResponseWriter, r *http.Request) {
	info := infoOf(r)
	if info == nil || !(r.Close || w.Header().Get("Connection") == "close") {
		return
	}
	cs.mu.Lock()
	info.closing = true
	cs.changeLocked()
	cs.mu.Unlock()
}

// refuse answers a request on a connection refused at a bound.
func (cs *conns) refuse(w http.ResponseWriter, why *BusyError) {
	w.Header().Set("Connection", "close")
	writeBusy(w, why)
}

// count is the number of open connections, not counting those already
// closed to keep the bound.
func (cs *conns) count() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
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
// never a handler. An answer on a connection closed to make room (its
// long-poll told to answer early) says Connection: close.
type answerWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	slot    *slot
	timeout time.Duration
	conns   *conns
	conn    *connInfo
	started bool
}

func (a *answerWriter) start() {
	if a.started {
		return
	}
	a.started = true
	if a.conns.closingOf(a.conn) {
		a.Header().Set("Connection", "close")
	}
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
