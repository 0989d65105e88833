package runner

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/ttkit/ttkit/internal/procthread"
)

// procStat holds the fields of /proc/<pid>/stat the runner needs.
type procStat struct {
	state   byte   // field 3: R, S, Z, ...
	pgrp    int    // field 5
	session int    // field 6
	start   uint64 // field 22: start time in clock ticks since boot
}

// statMax bounds a /proc/<pid>/stat line: 52 numeric fields and a command
// name of at most 64 bytes (escaped) take well under a kilobyte.
const statMax = 4096

// readStat reads <procRoot>/<pid>/stat.
func readStat(procRoot string, pid int) (procStat, error) {
	return readStatFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"), make([]byte, statMax))
}

// readStatFile reads the stat file at path through buf (statMax bytes)
// with a plain open, read and close: the sweep after every job reads every
// process's, reusing one buffer, and os.ReadFile's fstat, poller
// registration and buffer for each made most of the sweep's cost.
func readStatFile(path string, buf []byte) (procStat, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return procStat{}, fmt.Errorf("reading %s: %w", path, err)
	}
	n, err := unix.Read(fd, buf)
	unix.Close(fd)
	switch {
	case err != nil:
		return procStat{}, fmt.Errorf("reading %s: %w", path, err)
	case n == len(buf):
		return procStat{}, fmt.Errorf("reading %s: longer than %d bytes", path, len(buf))
	}
	return parseStat(path, buf[:n])
}

// procFileMax bounds what readWhole reads of a /proc file: /proc/stat,
// and a process's environ (the kernel bounds the argument vector and
// environment together well below it).
const procFileMax = 16 << 20

// readWhole reads the file at path whole, into buf while it fits, else
// into a larger buffer, up to procFileMax, with a plain open, read and
// close: os.ReadFile's fstat and its poller steps (five system calls on
// a /proc file) cost more than the read (issue 41).
func readWhole(path string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	defer unix.Close(fd)
	b := buf[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, make([]byte, cap(b)+4096)...)[:len(b)]
		}
		n, err := unix.Read(fd, b[len(b):cap(b)])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return nil, fmt.Errorf("reading %s: %w", path, err)
		case n == 0:
			return b, nil
		}
		if b = b[:len(b)+n]; len(b) > procFileMax {
			return nil, fmt.Errorf("reading %s: longer than %d bytes", path, procFileMax)
		}
	}
}

// parseStat reads the fields procStat holds from the text of path, a
// /proc/<pid>/stat.
func parseStat(path string, b []byte) (procStat, error) {
	// The command name (field 2) is in parentheses and may hold spaces or
	// parentheses itself; the fields after the last ')' are plain.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("parsing %s: no ')'", path)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("parsing %s: %d fields", path, len(f))
	}
	pgrp, err1 := strconv.Atoi(string(f[2]))
	session, err3 := strconv.Atoi(string(f[3]))
	start, err2 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return procStat{}, fmt.Errorf("parsing %s: bad pgrp, session or start time", path)
	}
	return procStat{state: f[0][0], pgrp: pgrp, session: session, start: start}, nil
}

// ended says whether the process procRoot/name, whose stat is st, has
// ended: a zombie with no thread left. A process whose main thread exited
// reads Z too while its other threads run on, holding what it opened; it
// has not ended. Only a zombie's task list is read.
func ended(procRoot, name string, st procStat) bool {
	return st.state == 'Z' && procthread.Other(filepath.Join(procRoot, name), nil) == ""
}

// StartTime returns field 22 of <procRoot>/<pid>/stat: when the process
// started, in clock ticks since boot.
func StartTime(procRoot string, pid int) (uint64, error) {
	st, err := readStat(procRoot, pid)
	return st.start, err
}

// ProcessGroup returns the process group of pid (field 5 of
// <procRoot>/<pid>/stat). The scheduler uses it to tell a card's holders
// that belong to the job running on the card from foreign ones.
func ProcessGroup(procRoot string, pid int) (int, error) {
	st, err := readStat(procRoot, pid)
	return st.pgrp, err
}

// JobIDOf returns the value of TT_QUEUE_JOB_ID in pid's environment, or ""
// when it has none. Every process a job starts inherits the variable, even
// one that left the job's process group. Another user's environment cannot
// be read (unless running as root); that is an error.
func JobIDOf(procRoot string, pid int) (string, error) {
	path := filepath.Join(procRoot, strconv.Itoa(pid), "environ")
	b, err := environ(procRoot, strconv.Itoa(pid))
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	prefix := []byte(JobEnvVar + "=")
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, prefix); ok {
			return string(v), nil
		}
	}
	return "", nil
}

// SignalableBy reports whether uid, unprivileged, could signal pid: uid is
// its real or saved uid. Whatever attributes a process to a job by the
// marker in its environment (text its user wrote) must also check this
// against the job's user, or a neighbour's process carrying another's
// marker is taken for that job's.
func SignalableBy(procRoot string, pid int, uid uint32) bool {
	return signalableBy(procRoot, strconv.Itoa(pid), uid)
}
