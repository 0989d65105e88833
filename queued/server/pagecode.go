package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/ttkit/ttkit/internal/loopuid"
	"github.com/ttkit/ttkit/queued/api"
)

// pageLogin opens the status page without its token in a browser's
// command line (which every user of the host reads with ps): the CLI,
// holding the token, asks POST /page/code for a one-time code; the
// browser is started on the page's address with that code after the #;
// the page exchanges it at POST /page/session for a page token, which
// reads GET /status, /changes and /logs/ and nothing else. The exchange
// is refused to a connection whose socket another user owns, so a code
// read from ps is worth nothing to them (and is not used up by them).
type pageLogin struct {
	*base
	codes *api.PageCodes
	// owner finds who owns a TCP connection's other end (loopuid.Owner;
	// tests may replace it).
	owner func(local, remote net.Addr) (uint32, error)
}

func newPageLogin(b *base) *pageLogin {
	return &pageLogin{base: b, codes: api.NewPageCodes(""), owner: loopuid.Owner}
}

// ownUser reports whether uid is the daemon's own user or root: the only
// users a code is issued to or exchanged for.
func ownUser(uid uint32) bool { return uid == 0 || int(uid) == os.Getuid() }

// handleCode is POST /page/code, after the token (TCP) or the peer
// (socket) was checked: a new one-time code for the daemon's own user.
func (pl *pageLogin) handleCode(w http.ResponseWriter, r *http.Request) {
	if c := callerOf(r); !ownUser(c.uid) {
		pl.fail(w, r, fmt.Errorf("a code to open the status page is for queued's own user and root, not %s (uid %d): "+
			"tt-device-queue web serves this queued's page itself: %w", userName(c.uid), c.uid, ErrForbidden))
		return
	}
	code, err := pl.codes.Issue()
	if errors.Is(err, api.ErrTooManyCodes) {
		writeError(w, http.StatusTooManyRequests, err.Error())
		return
	}
	if err != nil {
		pl.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.PageCodeResponse{Code: code, ExpiresIn: int(api.CodeLifetime.Seconds())})
}

// handleSession is POST /page/session, before any token: the code in the
// body, once, from a connection of the daemon's own user, for a page
// token.
func (pl *pageLogin) handleSession(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: use POST", r.Method, api.PageSessionPath))
		return
	}
	if uid, err := pl.peerUID(r); err != nil {
		writeError(w, http.StatusForbidden, "the status page's code is exchanged only on a connection of queued's own user: "+err.Error())
		return
	} else if !ownUser(uid) {
		writeError(w, http.StatusForbidden, fmt.Sprintf("the status page's code is exchanged only on a connection of queued's own user, not of %s (uid %d)", userName(uid), uid))
		return
	}
	code, err := api.ReadCode(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	tok, err := pl.codes.Exchange(code)
	if errors.Is(err, api.ErrBadCode) {
		writeError(w, http.StatusUnauthorized, err.Error()+": run tt-device-queue web --open again")
		return
	}
	if err != nil {
		pl.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.PageSessionResponse{Token: tok})
}

// peerUID is who made r: on a Unix socket the kernel's word for it
// (SO_PEERCRED), over TCP the owner of the connection's other end.
func (pl *pageLogin) peerUID(r *http.Request) (uint32, error) {
	if p, onSocket, err := PeerOf(r.Context()); onSocket {
		return p.UID, err
	}
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	remote, err := net.ResolveTCPAddr("tcp", r.RemoteAddr)
	if local == nil || err != nil {
		return 0, fmt.Errorf("the connection's addresses are unknown (%q)", r.RemoteAddr)
	}
	uid, err := pl.owner(local, remote)
	if err != nil {
		return 0, fmt.Errorf("who owns the connection from %s is unknown: %w", r.RemoteAddr, err)
	}
	return uid, nil
}

// pageRead reports whether r is one of the reads a page token may make:
// GET or HEAD of /status, /changes or /logs/{id}.
func pageRead(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	p := r.URL.Path
	return p == "/status" || p == "/changes" || (strings.HasPrefix(p, "/logs/") && !strings.Contains(p[len("/logs/"):], "/"))
}
