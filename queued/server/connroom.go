package server

import (
	"context"
	"net"
	"time"
)

// changeLocked wakes the refused connections waiting for room.
func (cs *conns) changeLocked() {
	close(cs.changed)
	cs.changed = make(chan struct{})
}

// connWait is how long a request on a connection over a bound waits for
// room (a connection of its bound closing, going idle or turning into a
// long-poll that can be told to answer) before it is answered 503: a
// busy machine slows answers down rather than refuse them.
const connWait = 10 * time.Second

// waitRoom waits, up to connWait, for room within the bound info's
// connection was refused at, and takes it: it reports whether the
// connection may be served after all.
func (cs *conns) waitRoom(ctx context.Context, info *connInfo) bool {
	t := time.NewTimer(connWait)
	defer t.Stop()
	for {
		cs.mu.Lock()
		var c net.Conn
		for oc, o := range cs.open {
			if o == info {
				c = oc
			}
		}
		if c == nil { // closed meanwhile
			cs.mu.Unlock()
			return false
		}
		within, _, _ := cs.overLocked(info)
		var victim net.Conn
		ok := within == nil
		if !ok {
			victim, ok = cs.makeRoomLocked(c, within)
		}
		if ok {
			info.closing, info.refused = false, ""
		}
		ch := cs.changed
		cs.mu.Unlock()
		if victim != nil {
			cs.evicted.Add(1)
			victim.Close()
		}
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}
