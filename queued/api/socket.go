package api

import (
	"context"
	"net"
	"net/http"
)

// MaxSocketPath is the longest path a Unix socket can be bound at or
// dialled (sun_path holds 108 bytes with its terminating NUL): the daemon,
// its settings and the CLI refuse a longer one by this one figure.
const MaxSocketPath = 107

// SocketFile is the Unix socket queued listens on inside its state
// directory. The directory is 0700 and the socket 0600, so no other user
// can listen there in queued's place or connect to it: the CLI talks to its
// daemon through it and sends no token. (System mode serves a socket of
// its own at TT_DEVICE_SOCKET by the same mechanism, with the kernel's
// peer credentials as the caller's identity.)
const SocketFile = "queued.sock"

// SystemSocket is where a system-mode queued (one root daemon for every
// user of the host, each job run as its submitter) listens by default.
// Clients fall back to it when the user's own daemon does not answer, so
// that a user of a shared host needs no setting to reach the host's queue.
const SystemSocket = "/run/tt-device-queue/queued.sock"

// NewUnixClient returns a client for the daemon listening on the Unix
// socket at path. It sends no token: who may connect is settled by the
// socket's permissions and checked by the daemon against the caller's
// credentials (SO_PEERCRED).
func NewUnixClient(path string) *Client {
	c := NewClient("http://localhost", "")
	tr := c.http.Transport.(*http.Transport)
	d := &net.Dialer{Timeout: dialTimeout}
	tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialContext(ctx, "unix", path)
	}
	return c
}

// ProbeUnix reports whether a daemon accepts connections on the Unix
// socket at path, so that a client can choose between the user's own
// daemon and SystemSocket before sending anything: nil when a connection
// was made (and closed at once, unused), else the dial's error, such as
// ENOENT (no socket), ECONNREFUSED (a socket left by a daemon that
// stopped) or EACCES (the socket's permissions keep the caller out). It
// gives up after the client's dial timeout, or when ctx ends.
func ProbeUnix(ctx context.Context, path string) error {
	d := &net.Dialer{Timeout: dialTimeout}
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return err
	}
	return conn.Close()
}
