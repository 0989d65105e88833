package loopuid_test

import (
	"errors"
	"net"
	"os"
	"testing"

	"github.com/ttkit/ttkit/internal/loopuid"
	"github.com/ttkit/ttkit/internal/usertest"
)

// accepted listens on addr, dials it with dial and returns the server's
// end of the connection.
func accepted(t *testing.T, network, addr string, dial func(string) (net.Conn, error)) net.Conn {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("no %s loopback here: %v", network, err)
	}
	defer ln.Close()
	c, err := dial(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The owner of a loopback connection's other end is the user whose
// socket it is: this process's, or another user's socket made by the
// test as that user, over IPv4 and IPv6.
func TestOwner(t *testing.T) {
	plain := func(a string) (net.Conn, error) { return net.Dial("tcp", a) }
	for _, tc := range []struct{ network, addr string }{{"tcp4", "127.0.0.1:0"}, {"tcp6", "[::1]:0"}} {
		s := accepted(t, tc.network, tc.addr, plain)
		uid, err := loopuid.Owner(s.LocalAddr(), s.RemoteAddr())
		if err != nil || uid != uint32(os.Getuid()) {
			t.Errorf("%s: owner %d, %v; want %d", tc.network, uid, err, os.Getuid())
		}
		if os.Geteuid() != 0 {
			continue
		}
		other := func(a string) (net.Conn, error) { return usertest.DialTCPAs(a, 54321, 54321) }
		s = accepted(t, tc.network, tc.addr, other)
		if uid, err := loopuid.Owner(s.LocalAddr(), s.RemoteAddr()); err != nil || uid != 54321 {
			t.Errorf("%s: another user's socket: owner %d, %v; want 54321", tc.network, uid, err)
		}
	}
	gone := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	if _, err := loopuid.Owner(gone, gone); !errors.Is(err, loopuid.ErrNotFound) {
		t.Errorf("a connection that is not there: %v, want ErrNotFound", err)
	}
	if _, err := loopuid.Owner(&net.UnixAddr{}, gone); err == nil {
		t.Error("a Unix address: no error")
	}
}
