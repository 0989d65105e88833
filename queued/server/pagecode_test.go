package server

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/api"
)

// The status page's one-time code (issue 38, finding 2): issued to a
// token holder, at most api.MaxOutstandingCodes at once; exchanged once,
// without the token, only on a connection of the daemon's own user (a
// refused attempt leaves the code good); the page token it gives reads
// the page's data and nothing else.
func TestPage_OneTimeCode(t *testing.T) {
	d := start(t, options{})
	noToken := map[string]string{"Authorization": ""}
	exchange := func(code string) (int, string) {
		status, body := d.raw(http.MethodPost, api.PageSessionPath, `{"code":"`+code+`"}`, noToken)
		var out api.PageSessionResponse
		json.Unmarshal([]byte(body), &out)
		return status, out.Token
	}

	if status, _ := d.raw(http.MethodPost, api.PageCodePath, `{}`, noToken); status != http.StatusUnauthorized {
		t.Errorf("a code without the token: %d, want 401", status)
	}
	c, err := d.client.PageCode(d.ctx())
	if err != nil || len(c.Code) != 64 || c.ExpiresIn != 60 {
		t.Fatalf("a code: %+v, %v", c, err)
	}

	// Another user's connection: refused, and the code stays good.
	d.srv.login.owner = func(net.Addr, net.Addr) (uint32, error) { return 54321, nil }
	if status, tok := exchange(c.Code); status != http.StatusForbidden || tok != "" {
		t.Errorf("another user's exchange: %d, want 403", status)
	}
	d.srv.login.owner = func(net.Addr, net.Addr) (uint32, error) { return 0, errNoSuchPeer }
	if status, _ := exchange(c.Code); status != http.StatusForbidden {
		t.Errorf("an exchange from a connection of no one known: %d, want 403", status)
	}
	d.srv.login.owner = func(net.Addr, net.Addr) (uint32, error) { return 0, nil } // root

	status, page := exchange(c.Code)
	if status != http.StatusOK || page == "" || page == d.token {
		t.Fatalf("the exchange: %d", status)
	}
	if status, _ := exchange(c.Code); status != http.StatusUnauthorized {
		t.Errorf("the second exchange: %d, want 401", status)
	}
	for _, bad := range []struct{ method, body string }{{"GET", ""}, {"POST", "not json"}, {"POST", `{"code":"` + strings.Repeat("a", 2000) + `"}`}} {
		if status, _ := d.raw(bad.method, api.PageSessionPath, bad.body, noToken); status != http.StatusMethodNotAllowed && status != http.StatusBadRequest {
			t.Errorf("%s %s with %.20q: %d, want 405 or 400", bad.method, api.PageSessionPath, bad.body, status)
		}
	}

	id := d.queue("0", "echo hi").JobID
	d.result(id)
	asPage := map[string]string{"Authorization": "Bearer " + page}
	for _, p := range []string{"/status", "/changes", "/logs/" + id} {
		if status, body := d.raw("GET", p, "", asPage); status != http.StatusOK {
			t.Errorf("the page token on GET %s: %d %s", p, status, body)
		}
	}
	for _, p := range [][2]string{{"GET", "/jobs"}, {"GET", "/job/" + id}, {"GET", "/result/" + id}, {"POST", "/queue"},
		{"POST", "/kill"}, {"POST", "/reset"}, {"POST", "/hold"}, {"POST", api.PageCodePath}, {"GET", "/logs/" + id + "/x"}} {
		if status, _ := d.raw(p[0], p[1], "{}", asPage); status != http.StatusUnauthorized {
			t.Errorf("the page token on %s %s: %d, want 401", p[0], p[1], status)
		}
	}

	for i := 0; i < api.MaxOutstandingCodes; i++ { // the first was used up
		if _, err := d.client.PageCode(d.ctx()); err != nil {
			t.Fatalf("code %d: %v", i+1, err)
		}
	}
	if _, err := d.client.PageCode(d.ctx()); !api.IsStatus(err, http.StatusTooManyRequests) {
		t.Errorf("a code past %d outstanding: %v, want 429", api.MaxOutstandingCodes, err)
	}
}

var errNoSuchPeer = &net.AddrError{Err: "no such peer"}
