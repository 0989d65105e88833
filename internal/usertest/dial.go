package usertest

import (
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// DialUnixAs connects to the Unix socket at path as uid and gid, as the
// kernel will report the caller (SO_PEERCRED) to the server, from this
// process, which must be root: the calling thread alone takes the ids
// for the connect and gives them back, so a test can open hundreds of
// connections as another user without a process per connection. The uid
// need not exist. The socket and every directory above it must let that
// user in (see OpenDir).
func DialUnixAs(path string, uid, gid uint32) (net.Conn, error) {
	runtime.LockOSThread()
	// Raw setresgid and setresuid change this thread only; the syscall
	// package's change every thread of the process.
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, ^uintptr(0), uintptr(gid), ^uintptr(0)); e != 0 {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("taking gid %d: %w", gid, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(uid), ^uintptr(0)); e != 0 {
		restoreGID()
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("taking uid %d: %w", uid, e)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err == nil {
		if err = unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
			unix.Close(fd)
		}
	}
	// Back to root before the thread may run anything else; a thread that
	// cannot go back is never unlocked, so it dies with its goroutine's
	// end instead of running others' code as the user.
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), 0, ^uintptr(0)); e != 0 {
		panic(fmt.Sprintf("usertest: giving uid %d back: %v", uid, e))
	}
	restoreGID()
	runtime.UnlockOSThread()
	if err != nil {
		return nil, fmt.Errorf("connecting to %s as uid %d: %w", path, uid, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s as uid %d: %w", path, uid, err)
	}
	return c, nil
}

func restoreGID() {
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, ^uintptr(0), 0, ^uintptr(0)); e != 0 {
		panic(fmt.Sprintf("usertest: giving gid 0 back: %v", e))
	}
}

// DialTCPAs connects to the TCP address addr (host:port, an IP address)
// from a socket made as uid and gid, so the kernel records that user as
// the socket's owner (the uid column of /proc/net/tcp), from this
// process, which must be root, as DialUnixAs does: a test acts as another
// local user reaching a loopback port without a process of its own.
func DialTCPAs(addr string, uid, gid uint32) (net.Conn, error) {
	ta, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s as uid %d: %w", addr, uid, err)
	}
	family, sa := unix.AF_INET, unix.Sockaddr(nil)
	if ip4 := ta.IP.To4(); ip4 != nil {
		s := &unix.SockaddrInet4{Port: ta.Port}
		copy(s.Addr[:], ip4)
		sa = s
	} else {
		family = unix.AF_INET6
		s := &unix.SockaddrInet6{Port: ta.Port}
		copy(s.Addr[:], ta.IP.To16())
		sa = s
	}
	runtime.LockOSThread()
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, ^uintptr(0), uintptr(gid), ^uintptr(0)); e != 0 {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("taking gid %d: %w", gid, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(uid), ^uintptr(0)); e != 0 {
		restoreGID()
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("taking uid %d: %w", uid, e)
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), 0, ^uintptr(0)); e != 0 {
		panic(fmt.Sprintf("usertest: giving uid %d back: %v", uid, e))
	}
	restoreGID()
	runtime.UnlockOSThread()
	if err != nil {
		return nil, fmt.Errorf("connecting to %s as uid %d: %w", addr, uid, err)
	}
	// The socket is the user's from its making; connecting needs no ids.
	if err := unix.Connect(fd, sa); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("connecting to %s as uid %d: %w", addr, uid, err)
	}
	f := os.NewFile(uintptr(fd), addr)
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s as uid %d: %w", addr, uid, err)
	}
	return c, nil
}
