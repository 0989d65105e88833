package cli_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

// TestWeb prints the page's URL with the token in its fragment, opens a
// browser only with --open, and gives the token to no server that cannot
// prove it is this queued.
func TestWeb(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	token, err := api.ReadToken(d.state)
	if err != nil {
		t.Fatal(err)
	}
	base, err := api.ReadAddress(d.state)
	if err != nil {
		t.Fatal(err)
	}
	opened := filepath.Join(t.TempDir(), "opened")
	browser := filepath.Join(t.TempDir(), "browser")
	if err := os.WriteFile(browser, []byte("#!/bin/sh\nprintf '%s' \"$1\" > "+opened+".tmp && mv "+opened+".tmp "+opened+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	env := []string{"BROWSER=" + browser}

	r := d.runWith(env, "", "web")
	r.want(t, 0, []string{base + "/#token=" + token}, nil)
	if !regexp.MustCompile(`^http://127\.0\.0\.1:[0-9]+/#token=[^\s]+\n$`).MatchString(r.stdout) {
		t.Fatalf("want only the URL on stdout: %v", r)
	}
	resp, err := http.Get(strings.TrimSuffix(strings.Split(r.stdout, "#")[0], "\n"))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), `<script src="/app.js"`) {
		t.Fatalf("the URL does not serve the page: %d %.200s", resp.StatusCode, page)
	}
	if _, err := os.Stat(opened); err == nil {
		t.Fatal("web opened a browser without --open")
	}

	r = d.runWith(env, "", "--json", "web", "--open")
	var out struct{ URL string }
	decode(t, r, &out)
	if out.URL != base+"/#token="+token {
		t.Fatalf("--json url %q", out.URL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := os.ReadFile(opened)
		if err == nil {
			if string(got) != out.URL {
				t.Fatalf("the browser was given %q, want %q", got, out.URL)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("--open started no browser within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A Unix socket has no page a browser can open: say so, naming it.
	sock := "unix://" + filepath.Join(d.state, api.SocketFile)
	d.runWith(append(env, "TT_DEVICE_URL="+sock), "", "web").want(t, 2, nil, []string{`"` + sock + `"`, "served on queued's TCP address", "a Unix socket"})

	// A server that cannot prove it holds the token gets no URL with it.
	impostor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"addr":"x","proof":"y"}`)
	}))
	defer impostor.Close()
	r = d.runWith(env, "", "--host", impostor.URL, "web")
	if r.code == 0 || strings.Contains(r.stdout+r.stderr, token) {
		t.Fatalf("web printed the token for an impostor: %v", r)
	}
}
