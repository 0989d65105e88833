package runner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A spare helper started by queued is a fork of queued and the execve of
// queued-exec: on our machines about 1.5 ms of the helper's CPU and 33
// page faults, beside the job it follows, and the fork's share of
// queued's own CPU (issue 41). The spawner is one queued-exec, started
// once and kept, that makes each spare by forking itself (start.c,
// qx_spawner): the spare is a copy of a small static process, already
// past its start, and with CLONE_PARENT it is queued's child all the
// same, so everything that holds a spare (its wait, its zombie kept for
// the sweep, its kill ladder) is unchanged. Only the C build of
// queued-exec has one; with the Go build, or a spawner that does not
// answer, spares are started as before.

// spawnerName is the spawner's argv[0]; spawnerHello is its first
// message, which says it is one. As in start.c.
const (
	spawnerName  = "queued-spawn"
	spawnerHello = "qxs1"
)

// spawnerTimeout bounds each wait for the spawner's answer: a spawner
// that does not answer (stopped, say) is killed, and spares are started
// as before until a new one answers. A variable for the tests.
var spawnerTimeout = 5 * time.Second

// spawner is queued's end of a spawner's socket.
type spawner struct {
	mu sync.Mutex // one request and its answer at a time
	// sock is queued's end of the socket pair (SOCK_SEQPACKET),
	// non-blocking and held by Go's poller: a wait for the spawner's
	// answer (its fork) parks the goroutine instead of holding a thread
	// and its P in a read (issue 41), and a deadline bounds the wait.
	sock    *os.File
	conn    syscall.RawConn // sock's, for its reads and writes
	timeout time.Duration   // spawnerTimeout when it started
	cmd     *exec.Cmd
}

// spawners holds each helper's spawner (Spec.Helper), started on first
// use; a nil entry is a helper that cannot be one, not asked again.
var spawners struct {
	sync.Mutex
	byHelper map[string]*spawner
}

// spawnerFor returns the spawner of helper, known as key, starting it on
// first use; nil where the helper cannot be one.
func spawnerFor(key string, helper helperExec) *spawner {
	spawners.Lock()
	defer spawners.Unlock()
	if sp, ok := spawners.byHelper[key]; ok {
		return sp
	}
	if spawners.byHelper == nil {
		spawners.byHelper = map[string]*spawner{}
	}
	// A helper that cannot be one (the Go build) is no error: its spares
	// are started, as a spare that cannot be made is.
	sp, _ := startSpawner(helper)
	spawners.byHelper[key] = sp
	return sp
}

// dropSpawner ends sp, which failed a request: the next spare starts a
// new spawner.
func dropSpawner(key string, sp *spawner) {
	spawners.Lock()
	if spawners.byHelper[key] == sp {
		delete(spawners.byHelper, key)
	}
	spawners.Unlock()
	sp.close()
}

// startSpawner starts helper as a spawner and waits for its hello.
func startSpawner(helper helperExec) (*spawner, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("making the spawner's socket: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fds[0]), unix.F_SETFL, unix.O_NONBLOCK); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, fmt.Errorf("making the spawner's socket: %w", err)
	}
	sock := os.NewFile(uintptr(fds[0]), "spawner socket") // non-blocking: the poller holds it
	theirs := os.NewFile(uintptr(fds[1]), "spawner socket")
	cmd := helper.command(theirs)
	cmd.Args[0] = spawnerName
	cmd.Env = []string{}
	cmd.Dir = "/"
	err = cmd.Start()
	theirs.Close()
	if err == nil {
		offQueuedsCPU(cmd.Process.Pid) // and so are the spares it forks
	}
	if err != nil {
		sock.Close()
		return nil, fmt.Errorf("starting the spawner: %w", err)
	}
	conn, err := sock.SyscallConn()
	if err != nil {
		sock.Close()
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("making the spawner's socket: %w", err)
	}
	sp := &spawner{sock: sock, conn: conn, timeout: spawnerTimeout, cmd: cmd}
	b := make([]byte, 16)
	n, err := sp.answer(b)
	if err != nil || string(b[:n]) != spawnerHello {
		sp.close()
		return nil, fmt.Errorf("the exec helper is no spawner: it answered %q, %v", b[:max(n, 0)], err)
	}
	return sp, nil
}

// spawn asks for a spare with the request pipe's read end req, the status
// pipe's write end status and the output pipe's write end out as its
// descriptors 3, 4, 1 and 2, and returns the spare, queued's child.
func (sp *spawner) spawn(req, status, out *os.File) (*exec.Cmd, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	rights := unix.UnixRights(int(req.Fd()), int(status.Fd()), int(out.Fd()))
	if err := sp.ask(rights); err != nil {
		return nil, fmt.Errorf("asking the spawner for a spare: %w", err)
	}
	var b [4]byte
	n, err := sp.answer(b[:])
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading the spawner's answer: %w", err)
	case n != len(b):
		return nil, fmt.Errorf("the spawner answered %d bytes, not %d", n, len(b))
	}
	pid := int32(binary.NativeEndian.Uint32(b[:]))
	if pid <= 0 {
		return nil, fmt.Errorf("the spawner could not fork: %w", syscall.Errno(-pid))
	}
	p, err := os.FindProcess(int(pid))
	if err != nil {
		return nil, fmt.Errorf("holding spare %d: %w", pid, err)
	}
	return &exec.Cmd{Process: p}, nil
}

// ask sends the spawner one request, for a spare with rights as its
// descriptors. Its requests go one at a time, each answered before the
// next (sp.mu), so its socket never holds more than one and a send never
// has to wait: one that would is an error, and the spawner is dropped.
func (sp *spawner) ask(rights []byte) error {
	var err error
	if cerr := sp.conn.Control(func(fd uintptr) {
		err = ignoringEINTR(func() error { return unix.Sendmsg(int(fd), []byte{'s'}, rights, nil, 0) })
	}); cerr != nil {
		return cerr
	}
	return err
}

// answer reads one message of the spawner into b, waiting for it no
// longer than its timeout.
func (sp *spawner) answer(b []byte) (int, error) {
	if err := sp.sock.SetReadDeadline(time.Now().Add(sp.timeout)); err != nil {
		return 0, err
	}
	var n int
	var rerr error
	if err := sp.conn.Read(func(fd uintptr) bool {
		rerr = ignoringEINTR(func() (err error) { n, err = unix.Read(int(fd), b); return err })
		return !errors.Is(rerr, unix.EAGAIN)
	}); err != nil {
		return 0, err
	}
	return n, rerr
}

// close ends the spawner: a running one would read the end of its socket
// and exit, a stopped one would not, so it is killed too, and reaped.
func (sp *spawner) close() {
	sp.sock.Close()
	sp.cmd.Process.Kill()
	sp.cmd.Wait()
}
