package api

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// ProofPath is the one endpoint that answers without the token: it lets a
// client that was pointed at a TCP address make sure the server there is
// its own queued before the client sends the token (see VerifyServer).
const ProofPath = "/proof"

// ProofResponse is the answer of GET /proof?nonce=N: the address the
// daemon listens on and HMAC-SHA256 keyed with its token over the nonce
// and that address. Only a server that holds the token can compute it,
// and binding the listen address makes a relay on another address that
// forwards the challenge to the real daemon fail the check.
type ProofResponse struct {
	Addr  string `json:"addr"`
	Proof string `json:"proof"`
}

// Proof is the hex HMAC the daemon answers a nonce with.
func Proof(token, nonce, addr string) string {
	m := hmac.New(sha256.New, []byte(token))
	io.WriteString(m, "queued proof v1\n"+nonce+"\n"+addr)
	return hex.EncodeToString(m.Sum(nil))
}

// ErrUnproven means the server at a TCP address could not prove that it
// holds the token: it is not the queued whose token the client has.
var ErrUnproven = errors.New("the server did not prove it holds this queued's token")

// VerifyServer asks the server at baseURL for a proof of the token over a
// fresh nonce, sending nothing secret, and checks it: the HMAC must match
// and the address the server proves it listens on must be the one the
// client addressed. It fails with ErrUnproven (wrapped with the reason), or
// with the network error when nothing answers.
func VerifyServer(ctx context.Context, baseURL, token string) error {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q: %w", baseURL, ErrUnproven)
	}
	var n [16]byte
	if _, err := rand.Read(n[:]); err != nil {
		return fmt.Errorf("making a nonce: %w", err)
	}
	nonce := hex.EncodeToString(n[:])
	c := NewClient(baseURL, "")
	defer c.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+ProofPath+"?nonce="+nonce, nil)
	if err != nil {
		return fmt.Errorf("building request: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", ProofPath, err)
	}
	defer drainClose(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s to %s: %w", baseURL, resp.Status, ProofPath, ErrUnproven)
	}
	var p ProofResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&p); err != nil {
		return fmt.Errorf("%s gave no proof (%v): %w", baseURL, err, ErrUnproven)
	}
	if !hmac.Equal([]byte(p.Proof), []byte(Proof(token, nonce, p.Addr))) {
		return fmt.Errorf("%s answered with a wrong proof: %w", baseURL, ErrUnproven)
	}
	if !sameAddr(u.Host, p.Addr) {
		return fmt.Errorf("%s proved it is the queued listening on %s, not the address asked for: %w", baseURL, p.Addr, ErrUnproven)
	}
	return nil
}

// sameAddr reports whether the host:port a client addressed names the
// address a daemon listens on: the same port, and the same host, where
// localhost stands for the loopback addresses.
func sameAddr(asked, listening string) bool {
	ah, ap, err1 := net.SplitHostPort(asked)
	lh, lp, err2 := net.SplitHostPort(listening)
	if err1 != nil || err2 != nil || ap != lp {
		return false
	}
	norm := func(h string) string {
		h = strings.ToLower(strings.Trim(h, "[]"))
		if h == "localhost" {
			return "loopback"
		}
		if ip := net.ParseIP(h); ip != nil && (ip.Equal(net.IPv4(127, 0, 0, 1)) || ip.Equal(net.IPv6loopback)) {
			return "loopback"
		}
		return h
	}
	return norm(ah) == norm(lh)
}
