package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/ttkit/ttkit/queued/api"
)

// Peer is the caller on a Unix socket as the kernel reports it
// (SO_PEERCRED): an identity the caller cannot choose.
type Peer struct {
	UID, GID uint32
	PID      int32
}

type peerKey struct{}

// peerConn carries a Unix connection's credentials, or why they could not
// be read.
type peerConn struct {
	peer Peer
	err  error
}

// ConnContext is http.Server's ConnContext: on a Unix socket it reads the
// caller's credentials once per connection and keeps them in the context
// of every request on it. TCP connections carry none.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	pc := peerConn{}
	raw, err := uc.SyscallConn()
	if err == nil {
		ctlErr := raw.Control(func(fd uintptr) {
			cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
			if err != nil {
				pc.err = fmt.Errorf("reading the caller's credentials: %w", err)
				return
			}
			pc.peer = Peer{UID: cred.Uid, GID: cred.Gid, PID: cred.Pid}
		})
		if ctlErr != nil {
			pc.err = ctlErr
		}
	} else {
		pc.err = err
	}
	return context.WithValue(ctx, peerKey{}, pc)
}

// PeerOf returns the caller's credentials for a request that came over a
// Unix socket; ok is false for TCP.
func PeerOf(ctx context.Context) (p Peer, ok bool, err error) {
	pc, ok := ctx.Value(peerKey{}).(peerConn)
	if !ok {
		return Peer{}, false, nil
	}
	return pc.peer, true, pc.err
}

// SameUser allows the daemon's own user, and root, on the socket: the
// user-mode policy (Config.AllowPeer).
func SameUser(p Peer) error {
	if int(p.UID) == os.Getuid() || p.UID == 0 {
		return nil
	}
	return fmt.Errorf("uid %d may not use the queue of uid %d", p.UID, os.Getuid())
}

// ListenUnix serves a Unix socket at path, created atomically: it is bound
// under a temporary name in the same directory, given mode (and group gid,
// unless gid < 0), and renamed into place, so it never exists with looser
// permissions, and a socket left by a daemon that died is replaced. The
// caller removes path when done.
func ListenUnix(path string, mode os.FileMode, gid int) (*net.UnixListener, error) {
	if len(path) > api.MaxSocketPath {
		return nil, fmt.Errorf("socket path %s is %d bytes, over the %d a Unix socket allows: use a shorter state directory (TT_DEVICE_LOG_DIR)", path, len(path), api.MaxSocketPath)
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+strconv.Itoa(os.Getpid()))
	if len(tmp) > api.MaxSocketPath {
		tmp = path + "~"
	}
	os.Remove(tmp)
	// The umask covers the moment between bind and chmod.
	old := unix.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", tmp, err)
	}
	ln.SetUnlinkOnClose(false)
	fail := func(err error) (*net.UnixListener, error) {
		ln.Close()
		os.Remove(tmp)
		return nil, err
	}
	if gid >= 0 {
		if err := os.Lchown(tmp, -1, gid); err != nil {
			return fail(fmt.Errorf("giving %s to group %d: %w", path, gid, err))
		}
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return fail(fmt.Errorf("setting the mode of %s: %w", path, err))
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(fmt.Errorf("placing the socket at %s: %w", path, err))
	}
	return ln, nil
}
