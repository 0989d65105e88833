package api

import (
	"context"
	"net"
	"net/http"
)

// SocketFile is the Unix socket queued listens on inside its state
// directory. The directory is 0700 and the socket 0600, so no other user
// can listen there in queued's place or connect to it: the CLI talks to its
// daemon through it and sends no token. (System mode serves a socket of
// its own at TT_DEVICE_SOCKET by the same mechanism, with the kernel's
// peer credentials as the caller's identity.)
const SocketFile = "queued.sock"

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
