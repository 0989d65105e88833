package devacl

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ttkit/ttkit/internal/usertest"
)

// openAs opens path read-write as u in a process of u's (the kernel's
// own permission check, no root in the way) and says whether it could;
// a refusal other than EACCES fails the test.
func openAs(t *testing.T, u usertest.User, path string) bool {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", `exec 3<>"$1"`, "sh", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID}}
	out, err := cmd.CombinedOutput()
	if err == nil {
		return true
	}
	if !strings.Contains(string(out), "Permission denied") {
		t.Fatalf("open of %s as %s: %v: %s", path, u.Name, err, out)
	}
	return false
}

// The hostile user's open() of a granted card fails with EACCES; the
// granted user's succeeds, through the by-id link too; once revoked, it
// fails for both.
func TestEnforcer_HostileUsers(t *testing.T) {
	usertest.RequireRoot(t)
	alice, mallory := usertest.New(t, "tacl"), usertest.New(t, "tacm")
	dir := filepath.Join(usertest.OpenDir(t), "tenstorrent")
	os.MkdirAll(filepath.Join(dir, "by-id"), 0o755)
	for _, n := range []string{"0", "1"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "by-id", "card-serial-0")
	os.Symlink("../0", link)
	e := &Enforcer{Dir: dir}
	if err := e.Check([]int{0, 1}); err != nil {
		t.Fatal(err)
	}
	node := e.Node(0)
	if openAs(t, alice, node) || openAs(t, mallory, node) {
		t.Fatal("a user opened a node nobody was granted")
	}
	if err := e.Grant([]int{0, 1}, alice.UID); err != nil {
		t.Fatal(err)
	}
	if !openAs(t, alice, node) || !openAs(t, alice, link) || !openAs(t, alice, e.Node(1)) {
		t.Fatal("the granted user cannot open their cards")
	}
	if openAs(t, mallory, node) || openAs(t, mallory, link) {
		t.Fatal("another user opened a granted card")
	}
	if err := e.Revoke([]int{0, 1}, alice.UID); err != nil {
		t.Fatal(err)
	}
	if openAs(t, alice, node) || openAs(t, alice, link) {
		t.Fatal("the user opened a card after the revoke")
	}
	if err := e.Check([]int{0, 1}); errors.Is(err, ErrOpenToOthers) {
		t.Fatal(err)
	}
}
