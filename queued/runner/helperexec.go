package runner

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/ttkit/ttkit/queued/cpupin"
	"github.com/ttkit/ttkit/queued/execjob"
)

// HelperName is the exec helper's binary (cmd/queued-exec), found beside
// queued's own executable.
const HelperName = "queued-exec"

// helperExec is how a start reaches the exec helper: a path and its
// arguments, or queued-exec held open since the first job.
type helperExec struct {
	argv []string
	// held is queued-exec opened O_PATH, or nil when argv[0] is a path.
	// It is executed as a descriptor of the child's, the last of its
	// ExtraFiles, not as /proc/self/fd/N with the number queued holds it
	// at: the child's descriptor shuffle before execve (Go's
	// forkAndExecInChild) moves its error pipe to the first number above
	// the highest descriptor passed, so when a start's request or status
	// pipe lands one below the held descriptor, the child's copy of that
	// number is the pipe, and execve refuses it (EACCES). The child's
	// ExtraFiles positions are the one thing the shuffle never moves.
	held *os.File
}

// command is the exec.Cmd that starts the helper with extra as its
// descriptors 3 and on (the held helper, if any, follows them; the helper
// marks it close-on-exec with every descriptor above its status pipe).
func (h helperExec) command(extra ...*os.File) *exec.Cmd {
	path := h.argv[0]
	files := extra
	if h.held != nil {
		files = append(append(make([]*os.File, 0, len(extra)+1), extra...), h.held)
		path = fmt.Sprintf("/proc/self/fd/%d", 3+len(extra))
	}
	cmd := exec.Command(path, h.argv[1:]...)
	cmd.ExtraFiles = files
	return cmd
}

// selfHelper runs queued itself as the exec helper: the fallback where
// queued-exec is not installed (and the way tests run in-process), slower
// to start (tens of milliseconds, queued's own initialization) but the
// same helper. /proc/self/exe is the binary queued runs now, so a binary
// replaced on disk since the start cannot speak another protocol.
var selfHelper = helperExec{argv: []string{"/proc/self/exe", execjob.Arg}}

// defaultHelper is the helper queued uses when a Spec names none:
// queued-exec beside queued's executable when it is there (and, when
// queued runs as root, belongs to root and only root may write to it),
// else queued itself.
var defaultHelper = sync.OnceValue(func() helperExec {
	exe, err := os.Executable()
	if err != nil {
		return selfHelper
	}
	p, err := CheckHelper(filepath.Join(filepath.Dir(exe), HelperName))
	if err != nil {
		return selfHelper
	}
	h, err := holdHelper(p)
	if err != nil {
		return selfHelper
	}
	return h
})

// holdHelper opens the helper at path to be executed through its
// descriptor, held from the first job on, so a queued-exec replaced on
// disk (an upgrade while queued runs) is not started by this queued.
func holdHelper(path string) (helperExec, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return helperExec{}, fmt.Errorf("opening the exec helper %s: %w", path, err)
	}
	return helperExec{argv: []string{path}, held: os.NewFile(uintptr(fd), path)}, nil
}

// offQueuedsCPU gives a helper queued has just started (pid) the CPUs
// queued started with, where queued keeps its own threads to one
// (package cpupin). A helper's request sets them again before its
// program runs, but a spare waits for its request beside queued's work
// for as long as the job before it runs, and the Go build starts a
// runtime meanwhile; the spawner forks every spare. The call sets the
// helper's main thread, which its later threads take them from; should
// it fail, the helper waits on queued's CPU.
func offQueuedsCPU(pid int) {
	if cpus, ok := cpupin.JobCPUs(); ok {
		unix.SchedSetaffinity(pid, &cpus)
	}
}
