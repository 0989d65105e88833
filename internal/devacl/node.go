package devacl

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrOpenToOthers refuses enforcement while a card's node admits someone
// besides root (and the admin group's standing grant): tt-kmd's udev
// rule leaves every node 0666.
var ErrOpenToOthers = errors.New("card node is open to users other than root")

// ErrNotNode refuses a card's node that is not a device node (or, in
// tests, a regular file standing in for one): a link planted in the
// device directory must not carry a grant elsewhere.
var ErrNotNode = errors.New("not a device node")

// Enforcer grants and revokes the read-write of card nodes numbered
// <Dir>/<card>. A /dev/tenstorrent/by-id/ link leads to the same inode,
// so a grant covers it. Its methods are safe to call from several
// goroutines on different cards; one card's grants are the scheduler's
// to serialize (one job holds a card at a time).
type Enforcer struct {
	// Dir holds the nodes (TT_DEVICE_DEV_DIR's /dev/tenstorrent).
	Dir string
	// AdminGID, when set, is the group (TT_DEVICE_ADMIN_GROUP) given a
	// standing read-write on every node, for monitoring that must open
	// cards.
	AdminGID *uint32
}

// Node is the path of card's node.
func (e *Enforcer) Node(card int) string { return filepath.Join(e.Dir, strconv.Itoa(card)) }

// NodeState is what a card's node admits.
type NodeState struct {
	Path string
	// Mode is what the owner, the owning group and others get (stat
	// shows the ACL's mask in the group bits instead, while grants are
	// given).
	Mode     fs.FileMode
	UID, GID uint32
	// Users and Groups are the named entries: the grants.
	Users, Groups []uint32
}

// State reads card's node.
func (e *Enforcer) State(card int) (NodeState, error) {
	st := NodeState{Path: e.Node(card)}
	err := e.on(card, func(fd int, proc string, s *unix.Stat_t, a ACL) error {
		base := a.perm(TagUserObj)<<6 | a.perm(TagGroupObj)<<3 | a.perm(TagOther)
		st.Mode, st.UID, st.GID = fs.FileMode(base), s.Uid, s.Gid
		st.Users, st.Groups = a.named(TagUser), a.named(TagGroup)
		return nil
	})
	return st, err
}

// Check refuses, naming the node, a card whose node admits anyone but
// root by its mode or its ACL's owner, owning group and other entries: an
// owner other than root; read or write for others; read or write for the
// owning group unless it is root's. Named entries are grants, which
// Reconcile clears.
func (e *Enforcer) Check(cards []int) error {
	for _, n := range cards {
		st, err := e.State(n)
		if err != nil {
			return err
		}
		var why []string
		err = e.on(n, func(_ int, _ string, s *unix.Stat_t, a ACL) error {
			rw := PermRead | PermWrite
			if s.Uid != 0 {
				why = append(why, fmt.Sprintf("owned by uid %d", s.Uid))
			}
			if a.perm(TagGroupObj)&rw != 0 && s.Gid != 0 {
				why = append(why, fmt.Sprintf("group gid %d may open it", s.Gid))
			}
			if a.perm(TagOther)&rw != 0 {
				why = append(why, "every user may open it")
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(why) > 0 {
			return fmt.Errorf("%s (mode %#o: %s; install the udev rule with make install-system ENFORCE=1): %w",
				st.Path, st.Mode.Perm(), strings.Join(why, ", "), ErrOpenToOthers)
		}
	}
	return nil
}

// Grant gives uid read-write on each of cards' nodes, and takes away
// any other user's grant there (one card, one user). When one node fails
// the ones granted before it are revoked again.
func (e *Enforcer) Grant(cards []int, uid uint32) error {
	for i, n := range cards {
		if err := e.set(n, []uint32{uid}); err != nil {
			e.Revoke(cards[:i], uid)
			return fmt.Errorf("granting uid %d card %d: %w", uid, n, err)
		}
	}
	return nil
}

// Revoke takes uid's grant off each of cards' nodes, leaving any other
// user's; it goes on past a failure and returns every failure.
func (e *Enforcer) Revoke(cards []int, uid uint32) error {
	var errs []error
	for _, n := range cards {
		err := e.on(n, func(fd int, proc string, _ *unix.Stat_t, a ACL) error {
			users := slices.DeleteFunc(a.named(TagUser), func(id uint32) bool { return id == uid })
			return write(proc, a.with(users, e.groups()))
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("revoking uid %d's grant on card %d: %w", uid, n, err))
		}
	}
	return errors.Join(errs...)
}

// Reconcile leaves on each of cards' nodes no grant but the admin
// group's standing one, and describes each grant it took away ("card 0:
// uid 1001"): at start, before anything is dispatched, no job runs, so
// every user grant is a leftover (of a crash).
func (e *Enforcer) Reconcile(cards []int) ([]string, error) {
	var stray []string
	for _, n := range cards {
		err := e.on(n, func(fd int, proc string, _ *unix.Stat_t, a ACL) error {
			for _, id := range a.named(TagUser) {
				stray = append(stray, fmt.Sprintf("card %d: uid %d", n, id))
			}
			for _, id := range a.named(TagGroup) {
				if e.AdminGID == nil || id != *e.AdminGID {
					stray = append(stray, fmt.Sprintf("card %d: gid %d", n, id))
				}
			}
			return write(proc, a.with(nil, e.groups()))
		})
		if err != nil {
			return stray, fmt.Errorf("clearing the grants of card %d: %w", n, err)
		}
	}
	return stray, nil
}

// groups are the named groups every node keeps.
func (e *Enforcer) groups() []uint32 {
	if e.AdminGID == nil {
		return nil
	}
	return []uint32{*e.AdminGID}
}

// set makes users the node's only user grants.
func (e *Enforcer) set(card int, users []uint32) error {
	return e.on(card, func(fd int, proc string, _ *unix.Stat_t, a ACL) error {
		return write(proc, a.with(users, e.groups()))
	})
}

// on opens card's node without following a link and without opening
// the device (O_PATH: the driver sees no open, and no holder appears),
// and hands fn the descriptor, its /proc/self/fd path (through which
// the xattr calls reach exactly that inode), its stat and its ACL.
func (e *Enforcer) on(card int, fn func(fd int, proc string, st *unix.Stat_t, a ACL) error) error {
	path := e.Node(card)
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if t := st.Mode & unix.S_IFMT; t != unix.S_IFCHR && t != unix.S_IFREG {
		return fmt.Errorf("%s (file type %#o): %w", path, t, ErrNotNode)
	}
	proc := "/proc/self/fd/" + strconv.Itoa(fd)
	a, err := read(proc, fs.FileMode(st.Mode&0o777))
	if err != nil {
		return fmt.Errorf("reading the ACL of %s: %w", path, err)
	}
	if err := fn(fd, proc, &st, a); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// read is the ACL of the file at proc, or its mode's when it has none.
func read(proc string, mode fs.FileMode) (ACL, error) {
	buf := make([]byte, 4+8*64)
	for {
		n, err := unix.Getxattr(proc, xattrName, buf)
		switch {
		case errors.Is(err, unix.ENODATA):
			return FromMode(mode), nil
		case errors.Is(err, unix.ERANGE):
			buf = make([]byte, 2*len(buf))
			continue
		case err != nil:
			return nil, err
		}
		return Parse(buf[:n])
	}
}

// write sets the file's ACL; the kernel sets its mode's group bits to the
// mask (or the group entry when a has no named entries, when it also
// drops the attribute).
func write(proc string, a ACL) error {
	b, err := a.Bytes()
	if err != nil {
		return err
	}
	if err := unix.Setxattr(proc, xattrName, b, 0); err != nil {
		return fmt.Errorf("setting %s: %w", xattrName, err)
	}
	return nil
}
