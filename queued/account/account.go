// Package account resolves the users and groups a system-mode queued acts
// for: who submitted a job (by uid, as the kernel reported it), what that
// user's job runs as (uid, primary gid, supplementary groups, home and
// shell from the user database, read when the job starts, as a login
// would), and whether a user belongs to the admin group.
package account

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
)

// ErrUnknownUser means the user database has no such user: one deleted
// after submitting a job, or a name that was never a user.
var ErrUnknownUser = errors.New("no such user")

// ErrUnknownGroup means the group database has no such group.
var ErrUnknownGroup = errors.New("no such group")

// Account is a user as the user database has it.
type Account struct {
	UID, GID uint32
	// Groups are the supplementary groups, the primary one included.
	Groups []uint32
	Name   string
	Home   string
	// Shell is the login shell; /bin/sh when the database gives none.
	Shell string
}

// passwdFile is the local user database; the login shell is read from it
// because os/user does not expose it.
const passwdFile = "/etc/passwd"

// LookupUID reads the account of uid, with its groups.
func LookupUID(uid uint32) (Account, error) {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		var unknown user.UnknownUserIdError
		if errors.As(err, &unknown) {
			return Account{}, fmt.Errorf("uid %d: %w", uid, ErrUnknownUser)
		}
		return Account{}, fmt.Errorf("looking up uid %d: %w", uid, err)
	}
	return fromUser(u)
}

// LookupName reads the account called name (or a numeric uid), with its
// groups.
func LookupName(name string) (Account, error) {
	if n, err := strconv.ParseUint(name, 10, 32); err == nil {
		return LookupUID(uint32(n))
	}
	u, err := user.Lookup(name)
	if err != nil {
		var unknown user.UnknownUserError
		if errors.As(err, &unknown) {
			return Account{}, fmt.Errorf("user %q: %w", name, ErrUnknownUser)
		}
		return Account{}, fmt.Errorf("looking up user %q: %w", name, err)
	}
	return fromUser(u)
}

func fromUser(u *user.User) (Account, error) {
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return Account{}, fmt.Errorf("user %s: uid %q is not a number", u.Username, u.Uid)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return Account{}, fmt.Errorf("user %s: gid %q is not a number", u.Username, u.Gid)
	}
	// All ones is -1 to the kernel, "leave this id as it is": a process
	// switched to it would keep root's. No account may have it.
	if uid == math.MaxUint32 || gid == math.MaxUint32 {
		return Account{}, fmt.Errorf("user %s: uid %d, gid %d: %d is not an id a process can take", u.Username, uid, gid, uint32(math.MaxUint32))
	}
	a := Account{UID: uint32(uid), GID: uint32(gid), Name: u.Username, Home: u.HomeDir, Shell: loginShell(passwdFile, u.Username)}
	ids, err := u.GroupIds()
	if err != nil {
		return Account{}, fmt.Errorf("reading the groups of user %s: %w", u.Username, err)
	}
	for _, s := range ids {
		g, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return Account{}, fmt.Errorf("user %s: group id %q is not a number", u.Username, s)
		}
		if g == math.MaxUint32 {
			return Account{}, fmt.Errorf("user %s: group id %d is not an id a process can take", u.Username, g)
		}
		if !slices.Contains(a.Groups, uint32(g)) {
			a.Groups = append(a.Groups, uint32(g))
		}
	}
	if !slices.Contains(a.Groups, a.GID) {
		a.Groups = append(a.Groups, a.GID)
	}
	return a, nil
}

// loginShell is the seventh field of name's line in the passwd file at
// path, or /bin/sh when there is none (a user from another database, or an
// empty field, which login also reads as /bin/sh).
func loginShell(path, name string) string {
	f, err := os.Open(path)
	if err != nil {
		return "/bin/sh"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) == 7 && fields[0] == name && fields[6] != "" {
			return fields[6]
		}
	}
	return "/bin/sh"
}

// Member reports whether the account is in group gid, as its primary or a
// supplementary group.
func (a Account) Member(gid uint32) bool {
	return a.GID == gid || slices.Contains(a.Groups, gid)
}

// Env is the login environment of the account: HOME, USER, LOGNAME and
// SHELL, as login sets them.
func (a Account) Env() []string {
	return []string{"HOME=" + a.Home, "USER=" + a.Name, "LOGNAME=" + a.Name, "SHELL=" + a.Shell}
}

// GroupID resolves a group name (or a numeric gid) to its gid.
func GroupID(name string) (uint32, error) {
	if n, err := strconv.ParseUint(name, 10, 32); err == nil {
		return uint32(n), nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		var unknown user.UnknownGroupError
		if errors.As(err, &unknown) {
			return 0, fmt.Errorf("group %q: %w", name, ErrUnknownGroup)
		}
		return 0, fmt.Errorf("looking up group %q: %w", name, err)
	}
	n, err := strconv.ParseUint(g.Gid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("group %s: gid %q is not a number", name, g.Gid)
	}
	return uint32(n), nil
}

// Name is the user name of uid, or "uid N" when the database has none;
// for display only.
func Name(uid uint32) string {
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		return u.Username
	}
	return "uid " + strconv.FormatUint(uint64(uid), 10)
}
