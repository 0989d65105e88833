package devacl

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// nodes stands in for /dev/tenstorrent: a regular file per card, mode
// 0600 root:root as the shipped udev rule leaves them, and a by-id link.
func nodes(t *testing.T, cards ...int) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range cards {
		p := filepath.Join(dir, itoa(n))
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestEnforcer_GrantRevoke(t *testing.T) {
	dir := nodes(t, 0, 1)
	e := &Enforcer{Dir: dir}
	if err := e.Grant([]int{0, 1}, 4242); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1} {
		st, err := e.State(n)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(st.Users, []uint32{4242}) {
			t.Fatalf("card %d users %v, want [4242]", n, st.Users)
		}
	}
	// A second grant on a card replaces whatever user grant was left there.
	if err := e.Grant([]int{1}, 77); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.State(1); !slices.Equal(st.Users, []uint32{77}) {
		t.Fatalf("users %v, want [77] only", st.Users)
	}
	if err := e.Revoke([]int{0, 1}, 4242); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.State(0); len(st.Users) != 0 {
		t.Fatalf("card 0 keeps %v after revoke", st.Users)
	}
	if st, _ := e.State(1); !slices.Equal(st.Users, []uint32{77}) {
		t.Fatalf("revoking 4242 took 77's grant: %v", st.Users)
	}
	fi, _ := os.Stat(filepath.Join(dir, "0"))
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode after revoke %v, want 0600", fi.Mode().Perm())
	}
}

func TestEnforcer_ReconcileKeepsOnlyAdminGroup(t *testing.T) {
	dir := nodes(t, 0)
	if err := (&Enforcer{Dir: dir}).Grant([]int{0}, 4242); err != nil {
		t.Fatal(err)
	}
	gid := uint32(4343)
	e := &Enforcer{Dir: dir, AdminGID: &gid}
	stray, err := e.Reconcile([]int{0})
	if err != nil {
		t.Fatal(err)
	}
	if len(stray) != 1 || !strings.Contains(stray[0], "uid 4242") {
		t.Fatalf("stray %v, want uid 4242's grant", stray)
	}
	st, _ := e.State(0)
	if len(st.Users) != 0 || !slices.Equal(st.Groups, []uint32{4343}) {
		t.Fatalf("after reconcile users %v groups %v", st.Users, st.Groups)
	}
	// The standing admin grant does not count as the node open to others.
	if err := e.Check([]int{0}); err != nil {
		t.Fatal(err)
	}
}

// A node is open to others when its other class may read or write, or its
// owning group may and that group is not root's, or its owner is not root.
func TestEnforcer_CheckNamesAnOpenNode(t *testing.T) {
	for name, tc := range map[string]struct {
		mode os.FileMode
		gid  int
	}{
		"0666 as tt-kmd leaves it": {0o666, 0},
		"other read":               {0o604, 0},
		"group rw, not root":       {0o660, 4343},
	} {
		t.Run(name, func(t *testing.T) {
			dir := nodes(t, 0, 3)
			p := filepath.Join(dir, "3")
			os.Chmod(p, tc.mode)
			os.Chown(p, 0, tc.gid)
			err := (&Enforcer{Dir: dir}).Check([]int{0, 3})
			if !errors.Is(err, ErrOpenToOthers) || !strings.Contains(err.Error(), p) {
				t.Fatalf("err %v, want ErrOpenToOthers naming %s", err, p)
			}
		})
	}
	dir := nodes(t, 0)
	os.Chmod(filepath.Join(dir, "0"), 0o660) // root's group
	if err := (&Enforcer{Dir: dir}).Check([]int{0}); err != nil {
		t.Fatalf("0660 root:root: %v", err)
	}
}

// The card's node is never a link: one planted there is refused, and
// nothing it points at changes.
func TestEnforcer_RefusesLinkAsNode(t *testing.T) {
	dir := nodes(t)
	target := filepath.Join(t.TempDir(), "passwd")
	os.WriteFile(target, nil, 0o600)
	os.Symlink(target, filepath.Join(dir, "0"))
	if err := (&Enforcer{Dir: dir}).Grant([]int{0}, 4242); !errors.Is(err, ErrNotNode) {
		t.Fatalf("err %v, want ErrNotNode", err)
	}
	if _, err := readACL(target); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// readACL is the ACL of the node at path (a test's look).
func readACL(path string) (ACL, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	return read(path, fi.Mode())
}
