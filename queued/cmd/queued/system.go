package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"

	"github.com/ttkit/ttkit/internal/devacl"
	"github.com/ttkit/ttkit/queued/account"
	"github.com/ttkit/ttkit/queued/config"
	"github.com/ttkit/ttkit/queued/scheduler"
	"github.com/ttkit/ttkit/queued/server"
)

// system is what system mode (TT_DEVICE_SOCKET) resolves at start, before
// anything is created: a setting naming a user or group that does not
// exist stops queued here, with the setting named.
type system struct {
	fence      scheduler.Fence // TT_DEVICE_ENFORCE=acl; nil when off
	socketMode os.FileMode
	socketGID  int // -1: leave the group
	adminGID   *uint32
	reset      *account.Account
}

// errNotRoot refuses system mode to a daemon that could not run jobs as
// their submitters.
var errNotRoot = errors.New("system mode (TT_DEVICE_SOCKET) runs each job as the user who submitted it, which needs root: start queued as root (the shipped unit queued-system.service does), or unset TT_DEVICE_SOCKET for user mode")

// resolveSystem checks that queued may run in system mode and resolves its
// groups and reset user.
func resolveSystem(cfg config.Config) (system, error) {
	sys := system{socketMode: 0o666, socketGID: -1}
	if os.Geteuid() != 0 {
		return sys, errNotRoot
	}
	if cfg.SocketGroup != "" {
		gid, err := account.GroupID(cfg.SocketGroup)
		if err != nil {
			return sys, fmt.Errorf("TT_DEVICE_SOCKET_GROUP=%s: %w", cfg.SocketGroup, err)
		}
		sys.socketMode, sys.socketGID = 0o660, int(gid)
	}
	if cfg.AdminGroup != "" {
		gid, err := account.GroupID(cfg.AdminGroup)
		if err != nil {
			return sys, fmt.Errorf("TT_DEVICE_ADMIN_GROUP=%s: %w", cfg.AdminGroup, err)
		}
		sys.adminGID = &gid
	}
	if cfg.ResetUser != "" {
		a, err := account.LookupName(cfg.ResetUser)
		if err != nil {
			return sys, fmt.Errorf("TT_DEVICE_RESET_USER=%s: %w", cfg.ResetUser, err)
		}
		sys.reset = &a
	}
	if cfg.Enforcing() {
		// Checked before anything is created: enforcement that starts
		// while a node admits everyone fences nothing.
		e := &devacl.Enforcer{Dir: cfg.DevDir, AdminGID: sys.adminGID}
		if err := e.Check(cfg.Devices); err != nil {
			return sys, fmt.Errorf("TT_DEVICE_ENFORCE=acl: %w", err)
		}
		sys.fence = e
	}
	return sys, nil
}

// ownedDir checks that dir is a directory (not a symlink to one) that
// belongs to queued's user and that no other user can write to: a root
// daemon must not keep its state, or serve its socket, where someone else
// could put a file or a link of their own. With create, a missing dir is
// made with mode 0700 first.
func ownedDir(dir, what string, create bool) error {
	if create {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("creating the %s %s: %w", what, dir, err)
		}
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("the %s: %w", what, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("the %s %s is a symlink; give its real path", what, dir)
	case !fi.IsDir():
		return fmt.Errorf("the %s %s is not a directory", what, dir)
	case !ok || int(st.Uid) != os.Geteuid():
		return fmt.Errorf("the %s %s belongs to uid %d, not to queued's user (uid %d): another user could replace what queued keeps there", what, dir, st.Uid, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("the %s %s has mode %04o, writable by other users: they could replace what queued keeps there (chmod go-w)", what, dir, fi.Mode().Perm())
	}
	return nil
}

// listenSystem prepares the state directory and serves the system socket.
func listenSystem(cfg config.Config, sys system) (*net.UnixListener, error) {
	if err := ownedDir(cfg.StateDir, "state directory", true); err != nil {
		return nil, err
	}
	if err := os.Chmod(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("making the state directory %s private: %w", cfg.StateDir, err)
	}
	if err := ownedDir(filepath.Dir(cfg.Socket), "socket's directory", false); err != nil {
		return nil, err
	}
	return server.ListenUnix(cfg.Socket, sys.socketMode, sys.socketGID)
}

// everyone lets every caller that got through the socket's permissions in:
// in system mode the kernel decides who may connect (the socket's mode and
// group), and what each caller may do is decided per job.
func everyone(server.Peer) error { return nil }
