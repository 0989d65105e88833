package server

import (
	"sync"
	"time"
)

// reserveTTL is how long whether a uid belongs to the reserve is
// remembered: it is asked as each connection opens, in the accept loop,
// where a lookup of the user database on every connection would slow
// everyone's connections down.
const reserveTTL = 10 * time.Second

// reserveRule decides who belongs to the reserve of connections and
// handlers (see who): root, queued's own user and, on a shared daemon,
// the members of the admin group, read from the user database at most
// once every reserveTTL per uid (a change of membership takes effect
// within it).
type reserveRule struct {
	rules *accessRules
	mu    sync.Mutex
	known map[uint32]reserveEntry
}

type reserveEntry struct {
	reserved bool
	at       time.Time
}

// reserved reports whether uid belongs to the reserve.
func (rr *reserveRule) reserved(uid uint32) bool {
	now := time.Now()
	rr.mu.Lock()
	e, ok := rr.known[uid]
	rr.mu.Unlock()
	if ok && now.Sub(e.at) < reserveTTL {
		return e.reserved
	}
	e = reserveEntry{reserved: rr.rules.admin(caller{uid: uid}), at: now}
	rr.mu.Lock()
	if rr.known == nil || len(rr.known) > 4096 {
		rr.known = map[uint32]reserveEntry{} // forget the lot now and then
	}
	rr.known[uid] = e
	rr.mu.Unlock()
	return e.reserved
}
