// Package usertest creates real users and groups for the tests of system
// mode, which must show what the kernel does when a job runs as another
// user: they need root (CI runs as root), and every user and group they
// create is removed when the test ends.
package usertest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// User is a user created for one test.
type User struct {
	Name     string
	UID, GID uint32
	Home     string
}

// RequireRoot skips the test unless it runs as root with useradd at
// hand: creating users and switching to them needs both. CI runs as root,
// so there the test always runs.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create users and run jobs as them (CI runs as root)")
	}
	for _, tool := range []string{"useradd", "userdel", "groupadd", "groupdel"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
}

// suffix is a short random name part, so parallel tests and runs left
// over from a killed test never collide.
func suffix(t testing.TB) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// admin runs useradd or groupadd. Tests of several packages run at once
// and each tool locks the user database while it writes, so one that
// finds it locked is run again, within a deadline.
func admin(t testing.TB, tool string, args ...string) {
	t.Helper()
	if err := retry(tool, args...); err != nil {
		t.Fatal(err)
	}
}

// retry runs tool until it succeeds, fails for another reason than a
// locked database or a user's process still exiting, or 30 seconds have
// passed.
func retry(tool string, args ...string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.Command(tool, args...).CombinedOutput()
		if err == nil {
			return nil
		}
		busy := strings.Contains(string(out), "lock") || strings.Contains(string(out), "used by process")
		if !busy || time.Now().After(deadline) {
			return fmt.Errorf("%s %s: %w: %s", tool, strings.Join(args, " "), err, out)
		}
		time.Sleep(50 * time.Millisecond) // the other writer holds the lock for milliseconds
	}
}

// Group creates a group and returns its name and gid.
func Group(t testing.TB, prefix string) (string, uint32) {
	t.Helper()
	RequireRoot(t)
	name := prefix + suffix(t)
	admin(t, "groupadd", name)
	t.Cleanup(func() { retry("groupdel", name) })
	g, err := user.LookupGroup(name)
	if err != nil {
		t.Fatal(err)
	}
	gid, _ := strconv.ParseUint(g.Gid, 10, 32)
	return name, uint32(gid)
}

// New creates a user with its own primary group, a home directory in a
// temporary directory, bash as its shell, and the given supplementary
// groups.
func New(t testing.TB, prefix string, groups ...string) User {
	t.Helper()
	return create(t, prefix, nil, groups)
}

// Reuse deletes old and creates a new user with old's uid, as a host
// does when it gives a departed user's uid to someone new.
func Reuse(t testing.TB, old User, prefix string) User {
	t.Helper()
	remove(old.Name)
	return create(t, prefix, []string{"--uid", strconv.FormatUint(uint64(old.UID), 10)}, nil)
}

// remove deletes a user, its own group and its processes. A test that
// failed may leave a job of the user running, and userdel refuses a user
// with processes.
func remove(name string) {
	exec.Command("pkill", "-KILL", "-u", name).Run()
	retry("userdel", name)
	retry("groupdel", name)
}

// create is New with extra useradd arguments.
func create(t testing.TB, prefix string, extra, groups []string) User {
	t.Helper()
	RequireRoot(t)
	name := prefix + suffix(t)
	home := filepath.Join(OpenDir(t), name)
	args := append([]string{"--create-home", "--home-dir", home, "--shell", "/bin/bash", "--user-group"}, extra...)
	if len(groups) > 0 {
		args = append(args, "--groups", strings.Join(groups, ","))
	}
	admin(t, "useradd", append(args, name)...)
	t.Cleanup(func() { remove(name) })
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return User{Name: name, UID: uint32(uid), GID: uint32(gid), Home: home}
}

// OpenDir is a temporary directory that every user may enter and list
// (0755, and so is the test's temporary directory above it), for files
// and working directories the created users must reach.
func OpenDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
