package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/devacl"
	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/internal/usertest"
)

// cardNodes stands in for /dev/tenstorrent with one file per card, in a
// directory every user may enter: 0600 root:root, as the udev rule
// make install-system ENFORCE=1 installs leaves them, or mode.
func cardNodes(t *testing.T, mode os.FileMode) string {
	t.Helper()
	dir := filepath.Join(usertest.OpenDir(t), "tenstorrent")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"0", "1"} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, nil, mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
	}
	return dir
}

// opens reports whether u's own process may open path read-write; any
// refusal but EACCES fails the test.
func opens(t *testing.T, u usertest.User, path string) bool {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", `exec 3<>"$1"`, "sh", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID}}
	out, err := cmd.CombinedOutput()
	if err != nil && !strings.Contains(string(out), "Permission denied") {
		t.Fatalf("open of %s as %s: %v: %s", path, u.Name, err, out)
	}
	return err == nil
}

// TT_DEVICE_ENFORCE=acl refuses to start while a card node is open to
// others (tt-kmd's 0666), naming the node.
func TestSystem_EnforceRefusesAnOpenNode(t *testing.T) {
	usertest.RequireRoot(t)
	dir := cardNodes(t, 0o600)
	os.Chmod(filepath.Join(dir, "1"), 0o666)
	// Bounded: before enforcement, queued started and served on.
	cmd := exec.CommandContext(ctx(t), bin)
	cmd.Env = env("TT_DEVICE_IDS=0,1", "TT_DEVICE_LOG_DIR="+t.TempDir(), "TT_DEVICE_SOCKET="+filepath.Join(usertest.OpenDir(t), "q.sock"),
		"TT_DEVICE_ENFORCE=acl", "TT_DEVICE_DEV_DIR="+dir)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), filepath.Join(dir, "1")) || !strings.Contains(string(out), "ENFORCE=1") {
		t.Fatalf("%v; output:\n%s\nwant exit 1 naming %s/1 and the udev rule", err, out, dir)
	}
}

// Issue 44, as hostile users see it through the real daemon: another
// user's open of a running job's card fails with EACCES while the job's
// own open succeeds; after a kill -9 of queued and its restart no grant
// is left and the job's user can no longer open the card.
func TestSystem_EnforceFencesARunningJobsCard(t *testing.T) {
	alice, mallory := usertest.New(t, "ttea"), usertest.New(t, "ttem")
	dir := cardNodes(t, 0o600)
	state := t.TempDir()
	on := []string{"TT_DEVICE_ENFORCE=acl", "TT_DEVICE_DEV_DIR=" + dir}
	s := startSystem(t, state, on...)
	node := filepath.Join(dir, "0")
	id := s.queueAs(alice, alice.Home, fmt.Sprintf("exec 3<>%q && echo opened; sleep 300", node))
	s.waitOutput(id, "opened")
	if opens(t, mallory, node) {
		t.Fatal("another user opened the running job's card")
	}
	if !opens(t, alice, node) {
		t.Fatal("the job's user cannot open its card")
	}
	s.cmd.Process.Kill()
	<-s.exited
	if !opens(t, alice, node) {
		t.Fatal("the grant was gone before the restart; this test would prove nothing")
	}
	startSystem(t, state, on...)
	st, err := (&devacl.Enforcer{Dir: dir}).State(0)
	if err != nil || len(st.Users) != 0 {
		t.Fatalf("grants %v after the restart (%v), want none", st.Users, err)
	}
	if opens(t, alice, node) {
		t.Fatal("the crashed job's user still opens the card after the restart")
	}
}

// What enforcement cannot do (issue 44, 2): a process that opened the
// card before its grant was taken back keeps its descriptor; queued sees
// it as a foreign holder (the driver's pids file) and does not start the
// next job on the card until it is gone, showing who it is, unless
// TT_DEVICE_WAIT_FOREIGN=0 says otherwise.
func TestSystem_EnforceWaitsForALeftoverDescriptor(t *testing.T) {
	alice := usertest.New(t, "ttel")
	for _, tc := range []struct {
		name  string
		extra []string
		waits bool
	}{{"waits", nil, true}, {"TT_DEVICE_WAIT_FOREIGN=0", []string{"TT_DEVICE_WAIT_FOREIGN=0"}, false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := cardNodes(t, 0o600)
			kmd := kmdtest.NewTree(t, filepath.Join(t.TempDir(), "kmd"))
			leftover := exec.Command("sleep", "300")
			if err := leftover.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { leftover.Process.Kill(); leftover.Wait() })
			kmd.SetPids(0, leftover.Process.Pid)
			s := startSystem(t, t.TempDir(), append([]string{"TT_DEVICE_ENFORCE=acl", "TT_DEVICE_DEV_DIR=" + dir,
				"TT_DEVICE_DRIVER_PATH=" + kmd.Dir}, tc.extra...)...)
			id := s.queueAs(alice, alice.Home, "echo ran")
			if !tc.waits {
				s.waitOutput(id, "ran")
				return
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				st, err := s.client.Status(ctx(t))
				if err != nil {
					t.Fatal(err)
				}
				if why := st.Cards[0].PausedReason; strings.Contains(why, fmt.Sprintf("pid %d", leftover.Process.Pid)) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("card 0 not paused by the leftover holder: %+v", st.Cards[0])
				}
				time.Sleep(20 * time.Millisecond) // polling the status
			}
			if j := s.job(id); j.State != "queued" {
				t.Fatalf("the next job is %s while a leftover descriptor holds its card", j.State)
			}
			kmd.SetPids(0)
			s.waitOutput(id, "ran")
		})
	}
}
