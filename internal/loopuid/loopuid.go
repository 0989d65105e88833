// Package loopuid tells which user of this host owns the other end of a
// TCP connection made on this host, from the kernel's socket tables
// (/proc/net/tcp and tcp6, the uid column), as identd once did. A loopback
// port is open to every local user; a server that must serve only its own
// user (the status page's code exchange, web's page proxy) asks this, the
// TCP counterpart of SO_PEERCRED on a Unix socket.
package loopuid

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// ErrNotFound means no socket of this network namespace is the
// connection's other end: the peer is on another host or in another
// namespace, or has gone.
var ErrNotFound = errors.New("the connection's other end is no socket of this host")

// tables are the kernel's TCP socket tables, IPv4 and IPv6.
var tables = []string{"/proc/net/tcp", "/proc/net/tcp6"}

// Owner returns the uid that owns the socket at the other end of the TCP
// connection whose ends are local (this process's) and remote (the
// peer's). It reads the socket tables each call (a few hundred
// microseconds on a quiet host), so call it once per connection.
func Owner(local, remote net.Addr) (uint32, error) {
	l, lok := local.(*net.TCPAddr)
	r, rok := remote.(*net.TCPAddr)
	if !lok || !rok {
		return 0, fmt.Errorf("finding the owner of %v: not a TCP connection", remote)
	}
	// The peer's socket lists its own address first, ours second; an IPv4
	// connection may sit in the IPv6 table under mapped addresses.
	want := map[string]bool{}
	for _, v6 := range []bool{false, true} {
		if ra, la := encode(r, v6), encode(l, v6); ra != "" && la != "" {
			want[ra+" "+la] = true
		}
	}
	for _, path := range tables {
		uid, err := find(path, want)
		if err == nil {
			return uid, nil
		}
		if !errors.Is(err, ErrNotFound) && !errors.Is(err, os.ErrNotExist) {
			return 0, err
		}
	}
	return 0, fmt.Errorf("finding the owner of %v: %w", remote, ErrNotFound)
}

// find scans one table for a line whose local and remote addresses are
// in want and returns its uid.
func find(path string, want map[string]bool) (uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("reading the socket table: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 || !want[fields[1]+" "+fields[2]] {
			continue
		}
		uid, err := strconv.ParseUint(fields[7], 10, 32)
		if err != nil {
			return 0, fmt.Errorf("%s: uid %q: %w", path, fields[7], err)
		}
		return uint32(uid), nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	return 0, ErrNotFound
}

// encode writes a as the kernel's tables do: the address as 32-bit words
// in host byte order, in hex, then the port; in the IPv6 table's form
// when v6 (an IPv4 address as ::ffff:a.b.c.d). It is "" for an address
// that table cannot hold.
func encode(a *net.TCPAddr, v6 bool) string {
	var ip []byte
	if v6 {
		ip = a.IP.To16()
	} else {
		ip = a.IP.To4()
	}
	if ip == nil {
		return ""
	}
	var b strings.Builder
	for i := 0; i < len(ip); i += 4 {
		fmt.Fprintf(&b, "%08X", binary.NativeEndian.Uint32(ip[i:i+4]))
	}
	fmt.Fprintf(&b, ":%04X", a.Port)
	return b.String()
}
