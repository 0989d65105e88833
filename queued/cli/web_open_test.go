package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/usertest"
	"github.com/ttkit/ttkit/queued/api"
)

// fakeBrowser is a browser for web --open: a script that records the
// address it was given and then stays alive with that address in its
// command line, as a real browser does, until the test ends. It returns
// the script and the file the address is recorded in.
func fakeBrowser(t *testing.T) (script, recorded string) {
	t.Helper()
	dir := t.TempDir()
	script, recorded = filepath.Join(dir, "browser"), filepath.Join(dir, "opened")
	stop := filepath.Join(dir, "stop")
	body := fmt.Sprintf("#!/bin/sh\nprintf '%%s' \"$1\" > %[1]s.tmp && mv %[1]s.tmp %[1]s\n"+
		"i=0; while [ ! -e %[2]s ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done\n", recorded, stop)
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.WriteFile(stop, nil, 0o600) })
	return script, recorded
}

// waitOpened is the address the fake browser was started on.
func waitOpened(t *testing.T, recorded string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(recorded); err == nil {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatal("--open started no browser within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// secretsInProcesses reads the command line and the environment of every
// process, as `ps -eo args` and `ps e` show them to whoever may read
// them, and reports each place one of secrets appears.
func secretsInProcesses(t *testing.T, secrets ...string) []string {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, p := range procs {
		for _, f := range []string{"cmdline", "environ"} {
			b, err := os.ReadFile(filepath.Join(p, f))
			if err != nil {
				continue // ended meanwhile
			}
			for _, s := range secrets {
				if s != "" && bytes.Contains(b, []byte(s)) {
					found = append(found, fmt.Sprintf("%s/%s: %q", p, f, bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
				}
			}
		}
	}
	return found
}

// exchange posts a one-time code to the page at base, as the page's
// script does, over conn when one is given, and returns the status and
// the token answered.
func exchange(t *testing.T, base, code string, dial func() (net.Conn, error)) (int, string) {
	t.Helper()
	tr := &http.Transport{}
	if dial != nil {
		tr.DialContext = func(context.Context, string, string) (net.Conn, error) { return dial() }
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	req, _ := http.NewRequest(http.MethodPost, base+api.PageSessionPath, strings.NewReader(fmt.Sprintf(`{"code":%q}`, code)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", base)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("exchanging the code: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct{ Token string }
	json.Unmarshal(b, &out)
	if resp.StatusCode != http.StatusOK && out.Token != "" {
		t.Errorf("a refused exchange (%d) still answered a token", resp.StatusCode)
	}
	return resp.StatusCode, out.Token
}

// bearer sends method path to base with token as the bearer token and
// returns the status.
func bearer(t *testing.T, method, base, path, token string) int {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

var codeURL = regexp.MustCompile(`^(http://127\.0\.0\.1:[0-9]+)/#code=([0-9a-f]{32,})$`)

// Issue 38, finding 2: web --open put the daemon's token in the
// browser's command line, where every user of the host reads it with ps
// and then acts as the victim. The browser now gets a one-time code: no
// process's command line or environment holds the token while the
// browser runs; the page exchanges the code once for a token that only
// reads the page's data; a second exchange, and one from another user's
// socket, are refused.
func TestWeb_OpenPutsNoTokenInAnyProcess(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	token, err := api.ReadToken(d.state)
	if err != nil {
		t.Fatal(err)
	}
	browser, recorded := fakeBrowser(t)
	r := d.runWith([]string{"BROWSER=" + browser}, "", "web", "--open")
	r.want(t, 0, nil, nil)
	opened := waitOpened(t, recorded)
	if found := secretsInProcesses(t, token); len(found) > 0 {
		t.Fatalf("while the browser runs, the daemon's token is readable in:\n%s", strings.Join(found, "\n"))
	}
	m := codeURL.FindStringSubmatch(opened)
	if m == nil {
		t.Fatalf("the browser was given %q, want the page's address with only a one-time code", opened)
	}
	base, code := m[1], m[2]

	if os.Geteuid() == 0 {
		// Another user who read the code from ps gets nothing for it,
		// and does not use it up.
		status, _ := exchange(t, base, code, func() (net.Conn, error) {
			return usertest.DialTCPAs(strings.TrimPrefix(base, "http://"), 54321, 54321)
		})
		if status != http.StatusForbidden {
			t.Errorf("another user's exchange of the code: %d, want 403", status)
		}
	}
	status, session := exchange(t, base, code, nil)
	if status != http.StatusOK || session == "" || session == token {
		t.Fatalf("exchanging the code: %d (a new token: %t)", status, session != "" && session != token)
	}
	if again, _ := exchange(t, base, code, nil); again != http.StatusUnauthorized {
		t.Errorf("the code worked twice: second exchange %d, want 401", again)
	}
	if got := bearer(t, "GET", base, "/status", session); got != http.StatusOK {
		t.Errorf("the page's token reading /status: %d, want 200", got)
	}
	for _, p := range [][2]string{{"POST", "/queue"}, {"POST", "/kill"}, {"GET", "/jobs"}, {"POST", api.PageCodePath}} {
		if got := bearer(t, p[0], base, p[1], session); got != http.StatusUnauthorized {
			t.Errorf("the page's token on %s %s: %d, want 401 (it only reads the page's data)", p[0], p[1], got)
		}
	}
}

// The same through the page proxy web serves for a daemon on a Unix
// socket (the host's system-mode queued): the browser gets a one-time
// code for the proxy's own token, which appears in no process either,
// and the proxy lets no other user's connection through, token or not.
func TestWeb_OpenThroughTheProxyPutsNoTokenInAnyProcess(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	daemonToken, _ := api.ReadToken(d.state)
	browser, recorded := fakeBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sock := "unix://" + filepath.Join(d.state, api.SocketFile)
	cmd := d.command(ctx, []string{"TT_DEVICE_URL=" + sock, "BROWSER=" + browser}, "web", "--open")
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
	printed := regexp.MustCompile(`^http://127\.0\.0\.1:[0-9]+/#token=([0-9a-f]{64})\n$`).FindStringSubmatch(line)
	if printed == nil {
		t.Fatalf("printed address %q", line)
	}
	proxyToken := printed[1]
	opened := waitOpened(t, recorded)
	if found := secretsInProcesses(t, proxyToken, daemonToken); len(found) > 0 {
		t.Fatalf("while the browser runs, a token is readable in:\n%s", strings.Join(found, "\n"))
	}
	m := codeURL.FindStringSubmatch(opened)
	if m == nil {
		t.Fatalf("the browser was given %q, want the page's address with only a one-time code", opened)
	}
	base, code := m[1], m[2]
	if os.Geteuid() == 0 {
		other := func() (net.Conn, error) {
			return usertest.DialTCPAs(strings.TrimPrefix(base, "http://"), 54321, 54321)
		}
		if status, _ := exchange(t, base, code, other); status != http.StatusForbidden {
			t.Errorf("another user's exchange of the code at the proxy: %d, want 403", status)
		}
		c := &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return other() }}}
		req, _ := http.NewRequest("GET", base+"/status", nil)
		req.Header.Set("Authorization", "Bearer "+proxyToken)
		if resp, err := c.Do(req); err != nil {
			t.Errorf("another user's request: %v", err)
		} else {
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("another user's request with the proxy's token: %d, want 403", resp.StatusCode)
			}
		}
	}
	status, session := exchange(t, base, code, nil)
	if status != http.StatusOK || session == "" || session == daemonToken {
		t.Fatalf("exchanging the code at the proxy: %d", status)
	}
	if again, _ := exchange(t, base, code, nil); again != http.StatusUnauthorized {
		t.Errorf("the code worked twice at the proxy: second exchange %d, want 401", again)
	}
	if got := bearer(t, "GET", base, "/status", session); got != http.StatusOK {
		t.Errorf("the page's token reading /status through the proxy: %d, want 200", got)
	}
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Errorf("web on Ctrl-C: %v; stderr %q", err, stderr.String())
	}
}
