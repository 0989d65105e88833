package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

// TestPage_FilesCarryNoDataAndNeedNoToken checks that the status page's
// files load without the token (the page must load before it can send
// it), with a strict CSP and no framing, and hold neither the token nor
// any job: the data comes only from endpoints that need the token.
func TestPage_FilesCarryNoDataAndNeedNoToken(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	secret := "echo page-secret-command-7f3a"
	d.queue("0", secret)
	noToken := map[string]string{"Authorization": ""}
	for path, typ := range map[string]string{"/": "text/html", "/app.js": "text/javascript", "/style.css": "text/css", "/favicon.svg": "image/svg+xml"} {
		req, _ := http.NewRequestWithContext(d.ctx(), http.MethodGet, d.url+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s without a token: %d", path, resp.StatusCode)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, typ) {
			t.Errorf("GET %s: Content-Type %q, want %s", path, ct, typ)
		}
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: CSP %q lacks %s", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: CSP %q allows unsafe code", path, csp)
		}
		if resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: headers %v", path, resp.Header)
		}
		code, body := d.raw(http.MethodGet, path, "", noToken)
		if code != http.StatusOK || strings.Contains(body, d.token) || strings.Contains(body, "page-secret-command") {
			t.Errorf("GET %s: %d, and the body holds the token or a job", path, code)
		}
	}
	_, html := d.raw(http.MethodGet, "/", "", noToken)
	scripts := regexp.MustCompile(`<script[^>]*>`).FindAllString(html, -1)
	if len(scripts) == 0 {
		t.Fatal("the page loads no script")
	}
	for _, s := range scripts {
		if !strings.Contains(s, `src="/`) {
			t.Errorf("inline script %s: the CSP forbids it", s)
		}
	}
	if regexp.MustCompile(`(?i)\son[a-z]+=|style=`).MatchString(html) {
		t.Error("the page has inline event handlers or styles, which the CSP forbids")
	}
}

// TestPage_DataStillNeedsTokenAndChecks checks that the page adds no way
// around the token, the Host and Origin checks, or the methods: the data
// endpoints answer 401 without the token, the page's files 403 to a
// foreign Host or Origin, and nothing under the page takes a POST.
func TestPage_DataStillNeedsTokenAndChecks(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	id := d.queue("0", "true").JobID
	d.result(id)
	noToken := map[string]string{"Authorization": ""}
	for _, p := range []string{"/status", "/changes", "/changes?since=1&wait=1", "/jobs", "/logs/" + id, "/job/" + id, "/?x=1", "/index.html", "/web/app.js"} {
		if code, body := d.raw(http.MethodGet, p, "", noToken); code != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: %d %s", p, code, body)
		}
	}
	for _, p := range []string{"/", "/app.js"} {
		if code, _ := d.raw(http.MethodGet, p, "", map[string]string{"Host": "evil.example:5741"}); code != http.StatusForbidden {
			t.Errorf("GET %s with a foreign Host: %d", p, code)
		}
		if code, _ := d.raw(http.MethodGet, p, "", map[string]string{"Origin": "http://evil.example"}); code != http.StatusForbidden {
			t.Errorf("GET %s with a foreign Origin: %d", p, code)
		}
		if code, _ := d.raw(http.MethodGet, p, "", map[string]string{"Sec-Fetch-Site": "cross-site"}); code != http.StatusForbidden {
			t.Errorf("GET %s cross-site: %d", p, code)
		}
	}
	for _, p := range []string{"/", "/app.js", "/changes"} {
		if code, _ := d.raw(http.MethodPost, p, "{}", nil); code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
			t.Errorf("POST %s with the token: %d, want 404 or 405", p, code)
		}
		if code, _ := d.raw(http.MethodPost, p, "{}", noToken); code != http.StatusUnauthorized {
			t.Errorf("POST %s without a token: %d, want 401", p, code)
		}
	}
}

func (d *daemon) changes(query string) (int, uint64) {
	d.t.Helper()
	code, body := d.raw(http.MethodGet, "/changes"+query, "", nil)
	var c changesResponse
	if code == http.StatusOK {
		if err := json.Unmarshal([]byte(body), &c); err != nil {
			d.t.Fatalf("GET /changes%s: %v: %s", query, err, body)
		}
	}
	return code, c.Gen
}

// TestChanges_LongPollAnswersAtTheNextChange checks GET /changes: at
// once without since=, at the next change with it, after wait without a
// change, and 400 for a bad since=.
func TestChanges_LongPollAnswersAtTheNextChange(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	code, gen := d.changes("")
	if code != http.StatusOK {
		t.Fatalf("GET /changes: %d", code)
	}
	if code, again := d.changes(fmt.Sprintf("?since=%d&wait=0.2", gen)); code != http.StatusOK || again != gen {
		t.Fatalf("no change: %d gen %d, want %d", code, again, gen)
	}
	type answer struct {
		code int
		gen  uint64
		at   time.Time
	}
	got := make(chan answer, 1)
	go func() {
		c, g := d.changes(fmt.Sprintf("?since=%d&wait=30", gen))
		got <- answer{c, g, time.Now()}
	}()
	poll(t, "the long-poll to wait", func() bool { return d.srv.slots.polling.Load() == 1 })
	queued := time.Now()
	d.queue("1", "true")
	a := <-got
	if a.code != http.StatusOK || a.gen == gen {
		t.Fatalf("after a submission: %d gen %d (was %d)", a.code, a.gen, gen)
	}
	if lag := a.at.Sub(queued); lag > time.Second {
		t.Errorf("the long-poll answered %s after the change, want within a second", lag)
	}
	for _, q := range []string{"?since=-1", "?since=x", "?since=1&wait=61", "?since=1&wait=x"} {
		if code, body := d.raw(http.MethodGet, "/changes"+q, "", nil); code != http.StatusBadRequest {
			t.Errorf("GET /changes%s: %d %s, want 400", q, code, body)
		}
	}
}

// The CLI's page proxy lets exactly the page's files through without a
// token: api.PagePaths must name them, no more and no fewer.
func TestPagePathsAreThePagesFiles(t *testing.T) {
	if len(api.PagePaths) != len(pageAssets) {
		t.Fatalf("api.PagePaths %v, page files %v", api.PagePaths, pageAssets)
	}
	for _, p := range api.PagePaths {
		if _, ok := pageAssets[p]; !ok {
			t.Errorf("api.PagePaths has %s, which is not a page file", p)
		}
	}
}
