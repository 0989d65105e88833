// Package fusetest mounts, for tests, a FUSE file system that never
// answers: the working directory that wedges whatever enters it. Any user
// can mount one in a namespace of their own, so queued must survive a job
// whose working directory is on one; these tests mount it as root (the
// kernel's /dev/fuse needs no FUSE library) and skip where they cannot.
package fusetest

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ttkit/ttkit/internal/proctest"
)

// HangingDir mounts a FUSE file system whose server never reads a request
// and returns a directory on it, and a function that aborts the mount:
// entering the directory (chdir, stat) blocks until then, killably. The
// test's cleanup aborts it too. It skips the test when not root or where
// FUSE cannot be mounted.
func HangingDir(t testing.TB) (dir string, abort func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a FUSE file system needs root")
	}
	mnt, err := os.MkdirTemp("", "ttq-fuse-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(mnt, 0o755)
	abort = HangOver(t, mnt)
	t.Cleanup(func() { os.Remove(mnt) })
	return filepath.Join(mnt, "sub"), abort
}

// HangOver mounts the never-answering file system over dir, an existing
// directory: whatever enters dir from then on blocks until abort (or the
// test's end). It skips the test when not root or where FUSE cannot be
// mounted.
func HangOver(t testing.TB, dir string) (abort func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a FUSE file system needs root")
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no FUSE here: %v", err)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", fd)
	if err := unix.Mount("ttq-hang", dir, "fuse", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		unix.Close(fd)
		t.Skipf("cannot mount FUSE here: %v", err)
	}
	var once sync.Once
	abort = func() {
		once.Do(func() {
			// A child forked but not yet exec'd shares the descriptor, and
			// the connection ends only with its last holder: kill such
			// children (stuck on the mount), then close ours.
			KillStuckChildren()
			unix.Close(fd)
			unix.Unmount(dir, unix.MNT_DETACH)
		})
	}
	t.Cleanup(abort)
	return abort
}

// KillStuckChildren SIGKILLs this process's children that wait on a FUSE
// request.
func KillStuckChildren() {
	for pid := range proctest.Children(os.Getpid()) {
		if w, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "wchan")); strings.HasPrefix(string(w), "fuse") {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// The FUSE protocol's few words the unanswering server needs (see
// include/uapi/linux/fuse.h): a request's header, the INIT opcode and the
// reply's header.
const (
	inHeaderLen  = 40 // len, opcode, unique, nodeid, uid, gid, pid, extlen, padding
	outHeaderLen = 16 // len, error, unique
	opInit       = 26
	initOutLen   = 64 // major, minor, readahead, flags, ..., unused[7]
)

// UnansweredDir mounts a FUSE file system whose server answers the
// kernel's INIT and then reads every request without ever answering it,
// and returns a directory on it and a function that ends the server. A
// process entering the directory blocks in uninterruptible sleep (state
// D): once the server has read a request, not even SIGKILL ends the wait,
// only the end of the server does. It is the working directory a hostile
// or broken FUSE server gives, the case HangingDir (whose waits SIGKILL
// still ends) does not cover. The test's cleanup ends the server too. It
// skips the test when not root or where FUSE cannot be mounted.
func UnansweredDir(t testing.TB) (dir string, abort func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a FUSE file system needs root")
	}
	mnt, err := os.MkdirTemp("", "ttq-fuse-d-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(mnt, 0o755)
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		os.Remove(mnt)
		t.Skipf("no FUSE here: %v", err)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", fd)
	if err := unix.Mount("ttq-unanswered", mnt, "fuse", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		unix.Close(fd)
		os.Remove(mnt)
		t.Skipf("cannot mount FUSE here: %v", err)
	}
	quit, served := make(chan struct{}), make(chan struct{})
	go serveUnanswered(fd, quit, served)
	var once sync.Once
	abort = func() {
		once.Do(func() {
			close(quit)
			<-served
			// The connection ends with its last descriptor: every request
			// still waiting fails, and what sleeps in D on it wakes.
			KillStuckChildren()
			unix.Close(fd)
			unix.Unmount(mnt, unix.MNT_DETACH)
			os.Remove(mnt)
		})
	}
	t.Cleanup(abort)
	return filepath.Join(mnt, "sub"), abort
}

// serveUnanswered answers INIT on fd and reads, and drops, every other
// request until quit closes.
func serveUnanswered(fd int, quit <-chan struct{}, served chan<- struct{}) {
	defer close(served)
	buf := make([]byte, 1<<20)
	for {
		select {
		case <-quit:
			return
		default:
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, _ := unix.Poll(pfd, 50); n <= 0 {
			continue
		}
		n, err := unix.Read(fd, buf)
		if err != nil || n < inHeaderLen {
			if err == unix.ENODEV {
				return // the mount is gone
			}
			continue
		}
		if binary.LittleEndian.Uint32(buf[4:]) != opInit {
			continue // read, never answered: the caller now sleeps in D
		}
		out := make([]byte, outHeaderLen+initOutLen)
		binary.LittleEndian.PutUint32(out[0:], uint32(len(out)))
		copy(out[8:16], buf[8:16]) // unique
		body := out[outHeaderLen:]
		binary.LittleEndian.PutUint32(body[0:], 7)     // major
		binary.LittleEndian.PutUint32(body[4:], 31)    // minor
		binary.LittleEndian.PutUint32(body[20:], 4096) // max_write
		unix.Write(fd, out)
	}
}
