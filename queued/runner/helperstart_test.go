package runner

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// A helper that cannot start at all leaves nothing behind, whatever the
// size of its request (one past the pipe's buffer is written by a
// goroutine): no goroutine, no descriptor, and an error that names the
// helper's start.
func TestRun_AHelperThatCannotStartLeavesNothingBehind(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b := setup(t, 1<<20)
	big := "BIG=" + strings.Repeat("x", 256<<10) // past the pipe's 64 KiB
	fds := func() int {
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	before := fds()
	for name, env := range map[string][]string{"small": testEnv(), "large": append(testEnv(), big)} {
		spec := b.spec("echo never")
		spec.Env = env
		spec.Helper = filepath.Join(b.dir, "no-such-helper")
		res := Run(spec, b.log, nil)
		if res.ExitCode != -1 || res.Iterations != 0 || !errors.Is(res.Err, fs.ErrNotExist) ||
			!strings.Contains(res.Err.Error(), "exec helper") {
			t.Errorf("%s request: exit %d, %d iterations, error %v; want -1, none, and the helper's start named", name, res.ExitCode, res.Iterations, res.Err)
		}
		if n := fds(); n != before {
			t.Errorf("%s request: %d descriptors open after the failed start, %d before", name, n, before)
		}
	}
}

// TestHelperPipes_TheHelpersEndsBlockAndOursPoll: the ends a helper gets
// are blocking and outside Go's poller (a program reading its output
// pipe non-blocking would see EAGAIN), queued's ends are non-blocking
// and take deadlines, and the output pipe carries what is written.
func TestHelperPipes_TheHelpersEndsBlockAndOursPoll(t *testing.T) {
	t.Parallel()
	p, err := newHelperPipes()
	if err != nil {
		t.Fatal(err)
	}
	defer p.closeOurs()
	for name, f := range map[string]*os.File{"request read": p.rr, "status write": p.sw, "output write": p.pw} {
		if nonblocking(t, f) {
			t.Errorf("the helper's %s end is non-blocking", name)
		}
		if err := f.SetDeadline(time.Now()); !errors.Is(err, os.ErrNoDeadline) {
			t.Errorf("the helper's %s end took a deadline (%v): the poller holds it", name, err)
		}
	}
	for name, f := range map[string]*os.File{"request write": p.rw, "status read": p.sr, "output read": p.pr} {
		if !nonblocking(t, f) {
			t.Errorf("queued's %s end is blocking", name)
		}
		if err := f.SetDeadline(time.Now().Add(time.Hour)); err != nil {
			t.Errorf("queued's %s end took no deadline: %v", name, err)
		}
	}
	if _, err := p.pw.Write([]byte("out\n")); err != nil {
		t.Fatal(err)
	}
	p.closeTheirs()
	got, err := io.ReadAll(p.pr)
	if err != nil || string(got) != "out\n" {
		t.Fatalf("output pipe carried %q, %v", got, err)
	}
}

// nonblocking reports whether f's descriptor has O_NONBLOCK, read
// without Fd (which would change it).
func nonblocking(t *testing.T, f *os.File) bool {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	var ferr error
	if err := rc.Control(func(fd uintptr) { flags, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil || ferr != nil {
		t.Fatal(err, ferr)
	}
	return flags&unix.O_NONBLOCK != 0
}
