package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/usertest"
)

// Issue 38, finding 2, as it was found on the host's system-mode queued:
// alice runs web --open, which serves her page through its proxy; bob,
// another user of the host, lists every process's command line (as
// himself, as ps would) and finds no token, and neither the code he can
// read there nor a request of his gets through alice's proxy to her job's
// record. Alice's browser still opens the page with the code.
func TestWeb_SystemModeOpenGivesAnotherUserNothing(t *testing.T) {
	t.Parallel()
	s := startShared(t)
	alice, bob := usertest.New(t, "ttwa"), usertest.New(t, "ttwb")
	r := s.run(alice, "queue", "-e", "ALICE_SECRET=hunter2", "--", "true")
	r.want(t, 0, nil, nil)
	job := strings.TrimSpace(r.stdout)

	// A browser alice may run, recording where she can write.
	dir := usertest.OpenDir(t)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	recorded, stop := filepath.Join(dir, "opened"), filepath.Join(dir, "stop")
	browser := filepath.Join(dir, "browser")
	body := fmt.Sprintf("#!/bin/sh\nprintf '%%s' \"$1\" > %[1]s.tmp && mv %[1]s.tmp %[1]s\n"+
		"i=0; while [ ! -e %[2]s ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done\n", recorded, stop)
	if err := os.WriteFile(browser, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.WriteFile(stop, nil, 0o644)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.cli, "web", "--open")
	cmd.Dir = alice.Home
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + alice.Home, "USER=" + alice.Name,
		"TT_DEVICE_URL=unix://" + s.sock, "BROWSER=" + browser}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: alice.UID, Gid: alice.GID}}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	printed := regexp.MustCompile(`^http://127\.0\.0\.1:[0-9]+/#token=([0-9a-f]{64})\n$`).FindStringSubmatch(line)
	if err != nil || printed == nil {
		t.Fatalf("web printed %q, %v; stderr %q", line, err, stderr.String())
	}
	token := printed[1]
	opened := waitOpened(t, recorded)

	// Bob reads every command line and environment he may.
	scan := exec.Command("sh", "-c", "for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ; do cat $f 2>/dev/null; echo; done")
	scan.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: bob.UID, Gid: bob.GID}}
	seen, err := scan.Output()
	if err != nil {
		t.Fatalf("bob's look at the processes: %v", err)
	}
	if !bytes.Contains(seen, []byte(opened)) {
		t.Fatalf("bob's look at the processes does not even show the browser's address %q: the test proves nothing", opened)
	}
	if bytes.Contains(seen, []byte(token)) {
		t.Fatal("bob reads alice's page token in a process's command line or environment")
	}
	m := codeURL.FindStringSubmatch(opened)
	if m == nil {
		t.Fatalf("the browser was given %q", opened)
	}
	base, code := m[1], m[2]
	asBob := func() (net.Conn, error) {
		return usertest.DialTCPAs(strings.TrimPrefix(base, "http://"), bob.UID, bob.GID)
	}
	if status, _ := exchange(t, base, code, asBob); status != http.StatusForbidden {
		t.Errorf("bob's exchange of alice's code: %d, want 403", status)
	}
	c := &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return asBob() }}}
	req, _ := http.NewRequest("GET", base+"/job/"+job, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err := c.Do(req); err != nil {
		t.Errorf("bob's request: %v", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("bob's request for alice's job through her proxy, even with her token: %d, want 403", resp.StatusCode)
		}
	}

	// Alice's browser (the test, as root, stands in for it) opens her page.
	status, page := exchange(t, base, code, nil)
	if status != http.StatusOK || page != token {
		t.Fatalf("alice's exchange: %d", status)
	}
	req, _ = http.NewRequest("GET", base+"/job/"+job, nil)
	req.Header.Set("Authorization", "Bearer "+page)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(buf.String(), "hunter2") {
		t.Errorf("alice's own job through her page: %d %.200s", resp.StatusCode, buf.String())
	}
}
