package cli_test

import (
	"bufio"
	"bytes"
	"context"
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
// browser only with --open (on a one-time code, never the token: see
// TestWeb_OpenPutsNoTokenInAnyProcess), and gives the token to no server
// that cannot prove it is this queued.
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
			if !regexp.MustCompile(`^` + regexp.QuoteMeta(base) + `/#code=[0-9a-f]{64}$`).Match(got) {
				t.Fatalf("the browser was given %q, want %s/#code=...", got, base)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("--open started no browser within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}

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

// A daemon reached over a Unix socket (system mode has no TCP port) gets
// its page served by web itself: on loopback, as the user, with a token of
// its own for everything but the page's files, reads only, other pages'
// requests refused, until Ctrl-C.
func TestWeb_ServesTheSocketsPage(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	sock := "unix://" + filepath.Join(d.state, api.SocketFile)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := d.command(ctx, []string{"TT_DEVICE_URL=" + sock}, "web")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("web printed no address: %v; stderr %q", err, stderr.String())
	}
	m := regexp.MustCompile(`^(http://127\.0\.0\.1:[0-9]+)/#token=([0-9a-f]{64})\n$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("address %q", line)
	}
	base, token := m[1], m[2]
	daemonToken, _ := api.ReadToken(d.state)
	if token == daemonToken {
		t.Fatal("web gave out the daemon's own token")
	}
	get := func(method, path string, header ...string) (int, string) {
		req, _ := http.NewRequest(method, base+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			if header[i] == "Host" {
				req.Host = header[i+1]
				continue
			}
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("GET", "/"); code != 200 || !strings.Contains(body, `<script src="/app.js"`) {
		t.Errorf("the page: %d %.100s", code, body)
	}
	if code, _ := get("GET", "/status"); code != http.StatusUnauthorized {
		t.Errorf("status without the token: %d, want 401", code)
	}
	if code, _ := get("GET", "/status", "Authorization", "Bearer "+daemonToken); code != http.StatusUnauthorized {
		t.Errorf("status with the daemon's token: %d, want 401", code)
	}
	auth := []string{"Authorization", "Bearer " + token}
	if code, body := get("GET", "/status", auth...); code != 200 || !strings.Contains(body, `"cards"`) || !strings.Contains(body, `"caller"`) {
		t.Errorf("status with the token: %d %.200s", code, body)
	}
	if code, _ := get("POST", "/kill", auth...); code != http.StatusMethodNotAllowed {
		t.Errorf("POST through the page: %d, want 405", code)
	}
	if code, _ := get("GET", "/status", append(auth, "Origin", "http://evil.example")...); code != http.StatusForbidden {
		t.Errorf("another page's request: %d, want 403", code)
	}
	if code, _ := get("GET", "/status", append(auth, "Host", "evil.example:80")...); code != http.StatusForbidden {
		t.Errorf("a rebound host name: %d, want 403", code)
	}
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Errorf("web on Ctrl-C: %v; stderr %q", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "until Ctrl-C") {
		t.Errorf("stderr %q does not say how long the page is served", stderr.String())
	}
}
