package server

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

// admission decides whether a request is served at all, before it may
// take a handler slot, so a refused request costs nothing and causes
// nothing: the connection bound (conns), then Host, Origin and
// Sec-Fetch-Site (admit), the token over TCP or the caller's credentials
// on a Unix socket (authorize), and the path, content coding, content
// type and declared size (checkRequest). It also answers GET /proof,
// which needs no token.
type admission struct {
	*base
	token      string
	listenAddr string
	allowPeer  func(Peer) error
	extraHosts []string
	// pageTokens are the status page's tokens (pageLogin), good for the
	// page's reads only.
	pageTokens *api.PageCodes
	maxBody    int64
	// writeTimeout bounds the writing of an answer from its first byte.
	writeTimeout time.Duration
	conns        *conns
	slots        *slots
	// streams are the long-lived requests, with handlers of their own.
	streams *streams
}

// admit takes a request in: its connection's place within the bound, a
// claim on a handler slot (not yet held), a writer that arms the write
// deadline and gives the slot back when the answer starts, the headers
// every answer carries, and the Host, Origin and Sec-Fetch-Site checks
// that refuse requests a web page made. It reports false when it has
// answered the request with a refusal.
func (ad *admission) admit(rw http.ResponseWriter, r *http.Request) (http.ResponseWriter, *slot, bool) {
	refused := ad.conns.enter(r)
	pool := ad.slots
	if isStream(r) {
		pool = ad.streams.work
	}
	sl := pool.claim(whoIs(r))
	aw := &answerWriter{ResponseWriter: rw, rc: http.NewResponseController(rw), slot: sl, timeout: ad.writeTimeout,
		conns: ad.conns, conn: infoOf(r)}
	// The deadline of the connection's previous answer must not cut this
	// one; nothing is written until the answer starts.
	aw.rc.SetWriteDeadline(time.Time{})
	var w http.ResponseWriter = aw
	if refused != nil {
		ad.conns.refuse(w, refused)
		return w, sl, false
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if !ad.hostAllowed(r.Host) {
		writeError(w, http.StatusForbidden, fmt.Sprintf("Host %q is not a loopback name; queued answers only requests addressed to localhost, 127.0.0.1 or [::1]", cut(r.Host, 100)))
		return w, sl, false
	}
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
		writeError(w, http.StatusForbidden, fmt.Sprintf("Origin %q is refused: queued takes no requests from web pages", cut(o, 100)))
		return w, sl, false
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		writeError(w, http.StatusForbidden, "cross-site requests are refused")
		return w, sl, false
	}
	return w, sl, true
}

// busy answers a request that found no room: 503 naming the bound when
// err is a *BusyError (see writeBusy), else 503 with err.
func (ad *admission) busy(w http.ResponseWriter, err error) {
	var be *BusyError
	if errors.As(err, &be) {
		writeBusy(w, be)
		return
	}
	writeError(w, http.StatusServiceUnavailable, err.Error())
}

// hostAllowed accepts loopback names, with or without a port, and the
// configured extra hosts. This refuses DNS-rebinding pages, whose requests
// carry the attacker's host name.
func (ad *admission) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	switch strings.ToLower(host) {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	for _, h := range ad.extraHosts {
		if strings.EqualFold(h, host) {
			return true
		}
	}
	return false
}

// authorize decides whether a request may go on: over a Unix socket by the
// caller's credentials (the token is not needed there), over TCP by the
// bearer token, or by a page token for the status page's reads.
func (ad *admission) authorize(w http.ResponseWriter, r *http.Request) bool {
	peer, onSocket, err := PeerOf(r.Context())
	if onSocket {
		if err == nil {
			err = ad.allowPeer(peer)
		}
		if err != nil {
			writeError(w, http.StatusForbidden, "refused on the socket: "+err.Error())
			return false
		}
		return true
	}
	header := r.Header.Get("Authorization")
	if tokenMatches(header, ad.token) {
		return true
	}
	if got, ok := strings.CutPrefix(header, "Bearer "); ok && pageRead(r) && ad.pageTokens.PageToken(strings.TrimSpace(got)) {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="queued"`)
	writeError(w, http.StatusUnauthorized, "missing or wrong bearer token; the token is in the file \"token\" in queued's state directory")
	return false
}

// checkRequest refuses, once the caller is known, a path that is not
// canonical, a content-encoded body and, for POST, a body that is not
// JSON or declares a length over the limit; it bounds the rest of a POST
// body as it is read. rw is the connection's own writer, so net/http
// closes the connection after a body that was too large.
func (ad *admission) checkRequest(w, rw http.ResponseWriter, r *http.Request) bool {
	if p := r.URL.EscapedPath(); !canonicalPath(p) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s: queued's paths have no empty, . or .. segments and no trailing /", cut(p, 100)))
		return false
	}
	if enc := contentEncoding(r.Header); enc != "" {
		w.Header().Set("Accept-Encoding", "identity")
		writeError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Encoding %q is not supported: send the body as it is (identity)", cut(enc, 40)))
		return false
	}
	if r.Method != http.MethodPost {
		return true
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "POST bodies must be JSON with Content-Type: application/json")
		return false
	}
	// A declared length over the limit is refused before a byte of the
	// body is read; a body that lies about its length, or is chunked, is
	// cut off by MaxBytesReader as it is read.
	if r.ContentLength > ad.maxBody {
		w.Header().Set("Connection", "close")
		ad.fail(w, r, fmt.Errorf("%w: %d bytes declared, the limit is %d bytes (TT_DEVICE_MAX_REQUEST_BYTES)",
			errBodyTooLarge, r.ContentLength, ad.maxBody))
		return false
	}
	r.Body = http.MaxBytesReader(rw, r.Body, ad.maxBody)
	return true
}

// readBody reads a POST body whole, within bodyReadTimeout, before the
// request may take a handler slot: a client that sends its body slowly
// then holds its connection (which may be closed to make room, as a
// slowloris's is) but no handler, so slow bodies cannot keep anyone
// else's request waiting. The handler reads the body from memory. It
// reports false when it has answered the request with a refusal (413 past
// the limit, 400 when the body could not be read).
func (ad *admission) readBody(w, rw http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
		return true
	}
	ad.conns.reading(r, true)
	defer ad.conns.reading(r, false)
	rc := http.NewResponseController(rw)
	rc.SetReadDeadline(time.Now().Add(bodyReadTimeout))
	defer rc.SetReadDeadline(time.Time{})
	body, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		ad.fail(w, r, fmt.Errorf("%w: the limit is %d bytes (TT_DEVICE_MAX_REQUEST_BYTES)", errBodyTooLarge, tooBig.Limit))
		return false
	case err != nil:
		ad.fail(w, r, fieldErr("body", "reading: %v", err))
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return true
}

// handleProof answers GET /proof?nonce=N with the token's HMAC over the
// nonce and the listen address (see api.VerifyServer). It needs no token
// and tells nothing about it.
func (ad *admission) handleProof(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: use GET", r.Method, api.ProofPath))
		return
	}
	nonce := r.URL.Query().Get("nonce")
	if len(nonce) < 16 || len(nonce) > 128 {
		writeError(w, http.StatusBadRequest, "nonce: want 16 to 128 characters")
		return
	}
	if ad.listenAddr == "" {
		writeError(w, http.StatusNotFound, "this queued proves nothing: it was started without a TCP address")
		return
	}
	writeJSON(w, http.StatusOK, api.ProofResponse{Addr: ad.listenAddr, Proof: api.Proof(ad.token, nonce, ad.listenAddr)})
}

// canonicalPath reports whether p, the path as sent (still escaped), is
// one ServeMux routes as it is: absolute, with no empty, "." or ".."
// segment and no trailing slash, except "/" itself. ServeMux answers any
// other path with a 307 redirect to its cleaned form, which invites a
// client to send the same POST again somewhere else; checkRequest answers
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

// tokenMatches compares an Authorization header with the token in
// constant time.
func tokenMatches(header, token string) bool {
	got, ok := strings.CutPrefix(header, "Bearer ")
	if !ok {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(token)) == 1
}
