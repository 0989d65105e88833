package server

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/api"
)

func TestCanonicalPath(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]bool{
		"/": true, "/queue": true, "/job/abcdef": true, "/job/%2e%2e%2fqueue": true, "/%2e%2e/queue": true,
		"": false, "*": false, "queue": false, "//queue": false, "/queue/": false, "/job/../queue": false,
		"/./queue": false, "/queue/.": false, "/queue/..": false, "/job//abcdef": false, "/..": false, "//": false,
	} {
		if got := canonicalPath(p); got != want {
			t.Errorf("canonicalPath(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestContentEncoding(t *testing.T) {
	t.Parallel()
	cases := []struct {
		values []string
		want   string
	}{
		{nil, ""},
		{[]string{""}, ""},
		{[]string{"identity"}, ""},
		{[]string{"Identity"}, ""},
		{[]string{" identity , IDENTITY "}, ""},
		{[]string{"gzip"}, "gzip"},
		{[]string{"x-gzip"}, "x-gzip"},
		{[]string{"identity, br"}, "br"},
		{[]string{"identity", "deflate"}, "deflate"},
		{[]string{"zstd", "gzip"}, "zstd"},
	}
	for _, tc := range cases {
		h := http.Header{"Content-Encoding": tc.values}
		if got := contentEncoding(h); got != tc.want {
			t.Errorf("contentEncoding(%q) = %q, want %q", tc.values, got, tc.want)
		}
	}
}

// send makes a request with client (which may follow redirects) and
// returns the final answer with its body read.
func (d *daemon) send(client *http.Client, method, path string, body []byte, hdr http.Header) (*http.Response, string) {
	d.t.Helper()
	req, err := http.NewRequestWithContext(d.ctx(), method, d.url+path, bytes.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		d.t.Fatal(err)
	}
	return resp, string(b)
}

// TestAPI_NonCanonicalPaths sends requests whose paths ServeMux would
// redirect to /queue, /kill or /reset with a client that follows
// redirects, as curl -L or a browser would: each gets a JSON 404 and
// nothing is queued, killed or reset.
func TestAPI_NonCanonicalPaths(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	gate, release := d.gate()
	defer release()
	running := d.queue("0", gate)
	d.waitOutput(running.JobID, "started")
	submit := []byte(fmt.Sprintf(`{"cmd":"true","cwd":%q}`, d.work))
	kill := []byte(`{"job_id":"` + running.JobID + `"}`)
	cases := []struct {
		method, path string
		body         []byte
	}{
		{"POST", "//queue", submit},
		{"POST", "/job/../queue", submit},
		{"POST", "/./queue", submit},
		{"POST", "/queue/", submit},
		{"POST", "/queue/.", submit},
		{"POST", "/x/y/../../queue?x=1", submit},
		{"POST", "//kill", kill},
		{"POST", "/status/../kill", kill},
		{"POST", "/status/../reset", []byte(`{}`)},
		{"GET", "//status", nil},
		{"GET", "/job/" + running.JobID + "/", nil},
		{"GET", "/job//" + running.JobID, nil},
		{"GET", "/logs/" + running.JobID + "/..", nil},
	}
	for _, tc := range cases {
		resp, body := d.send(http.DefaultClient, tc.method, tc.path, tc.body, nil)
		var e api.ErrorResponse
		if resp.StatusCode != http.StatusNotFound || json.Unmarshal([]byte(body), &e) != nil || !strings.HasPrefix(e.Error, "no endpoint ") {
			t.Errorf("%s %s: %d %s, want a JSON 404", tc.method, tc.path, resp.StatusCode, body)
		}
		if resp.Request.Response != nil {
			t.Errorf("%s %s: the client was redirected to %s", tc.method, tc.path, resp.Request.URL)
		}
	}
	st, err := d.client.Status(d.ctx())
	if err != nil || st.Queued != 0 || st.Cards[0].Current == nil || st.Cards[0].Current.ID != running.JobID || st.Cards[0].Reset != nil {
		t.Fatalf("after non-canonical requests: %+v, %v", st, err)
	}
	// The canonical paths still answer.
	if resp, body := d.send(http.DefaultClient, "GET", "/job/"+running.JobID, nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /job/<id>: %d %s", resp.StatusCode, body)
	}
}

// TestAPI_ContentEncoding: a body with any content coding but identity
// is refused with 415 by its header, before it is read, and nothing is
// queued; identity, in any case, is accepted.
func TestAPI_ContentEncoding(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	body := []byte(fmt.Sprintf(`{"cmd":"touch pwned","cwd":%q}`, d.work))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(body)
	zw.Close()
	for _, tc := range []struct {
		coding string
		body   []byte
	}{
		{"gzip", gz.Bytes()}, {"gzip", body}, {"br", body}, {"deflate", body}, {"compress", body}, {"x-gzip", body},
		{"identity, gzip", body}, {"GZip", body},
	} {
		resp, got := d.send(http.DefaultClient, "POST", "/queue", tc.body, http.Header{"Content-Encoding": {tc.coding}})
		var e api.ErrorResponse
		if resp.StatusCode != http.StatusUnsupportedMediaType || json.Unmarshal([]byte(got), &e) != nil {
			t.Errorf("Content-Encoding %s: %d %s, want a JSON 415", tc.coding, resp.StatusCode, got)
			continue
		}
		name := strings.TrimPrefix(tc.coding, "identity, ")
		if !strings.Contains(e.Error, `"`+name+`"`) || resp.Header.Get("Accept-Encoding") != "identity" {
			t.Errorf("Content-Encoding %s: %q with Accept-Encoding %q", tc.coding, e.Error, resp.Header.Get("Accept-Encoding"))
		}
	}
	resp, got := d.send(http.DefaultClient, "GET", "/status", nil, http.Header{"Content-Encoding": {"gzip"}})
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("GET with Content-Encoding: %d %s", resp.StatusCode, got)
	}
	if st, err := d.client.Status(d.ctx()); err != nil || st.Queued != 0 || st.Cards[0].Current != nil {
		t.Fatalf("a refused body queued a job: %+v, %v", st, err)
	}
	for _, coding := range []string{"identity", "Identity", ""} {
		ok := []byte(fmt.Sprintf(`{"cmd":"true","cwd":%q}`, d.work))
		if resp, got := d.send(http.DefaultClient, "POST", "/queue", ok, http.Header{"Content-Encoding": {coding}}); resp.StatusCode != http.StatusCreated {
			t.Errorf("Content-Encoding %q: %d %s", coding, resp.StatusCode, got)
		}
	}
}
