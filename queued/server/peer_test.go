package server

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// TestListenUnix_PrivateAtomicAndReplacesAStaleSocket: the socket is
// 0600 from the start, a stale one is replaced, and a too-long path is
// refused with the reason.
func TestListenUnix_PrivateAtomicAndReplacesAStaleSocket(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "q.sock")
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	ln, err := ListenUnix(path, 0o600, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(path)
	defer ln.Close()
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v, %v; want a 0600 socket", fi, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
	long := filepath.Join(dir, string(make([]byte, 120)))
	if _, err := ListenUnix(long, 0o600, -1); err == nil {
		t.Fatal("a 120-byte socket path was accepted")
	}
}

// TestConnContext_ReadsTheCallersCredentials over a real socket, and the
// user-mode policy admits only the daemon's user and root.
func TestConnContext_ReadsTheCallersCredentials(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "q.sock")
	ln, err := ListenUnix(path, 0o600, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(path)
	got := make(chan Peer, 1)
	srv := &http.Server{ConnContext: ConnContext, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok, err := PeerOf(r.Context())
		if !ok || err != nil {
			t.Errorf("no peer on a Unix socket: %v %v", ok, err)
		}
		got <- p
	})}
	go srv.Serve(ln)
	defer srv.Close()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	resp, err := c.Get("http://localhost/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	c.CloseIdleConnections()
	p := <-got
	if int(p.UID) != os.Getuid() || int(p.PID) != os.Getpid() {
		t.Fatalf("peer %+v; want uid %d pid %d", p, os.Getuid(), os.Getpid())
	}
	if err := SameUser(p); err != nil {
		t.Fatal(err)
	}
	if err := SameUser(Peer{UID: uint32(os.Getuid()) + 4242}); err == nil {
		t.Fatal("another user was admitted")
	}
}
