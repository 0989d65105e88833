package runner

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// procStat holds the fields of /proc/<pid>/stat the runner needs.
type procStat struct {
	state   byte   // field 3: R, S, Z, ...
	pgrp    int    // field 5
	session int    // field 6
	start   uint64 // field 22: start time in clock ticks since boot
}

func readStat(procRoot string, pid int) (procStat, error) {
	path := filepath.Join(procRoot, strconv.Itoa(pid), "stat")
	b, err := os.ReadFile(path)
	if err != nil {
		return procStat{}, fmt.Errorf("reading %s: %w", path, err)
	}
	return parseStat(path, b)
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
	var f [20][]byte // fields 3 to 22, without a slice for each line
	n := 0
	for rest := b[i+1:]; n < len(f); n++ {
		rest = bytes.TrimLeft(rest, " \n")
		if len(rest) == 0 {
			break
		}
		end := bytes.IndexAny(rest, " \n")
		if end < 0 {
			end = len(rest)
		}
		f[n], rest = rest[:end], rest[end:]
	}
	if n < len(f) || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("parsing %s: %d fields", path, n)
	}
	pgrp, err1 := atoi(f[2])
	session, err3 := atoi(f[3])
	start, err2 := atoi(f[19])
	if err1 != nil || err2 != nil || err3 != nil || start < 0 {
		return procStat{}, fmt.Errorf("parsing %s: bad pgrp, session or start time", path)
	}
	return procStat{state: f[0][0], pgrp: pgrp, session: session, start: uint64(start)}, nil
}

// atoi is strconv.Atoi of b without converting it to a string first.
func atoi(b []byte) (int, error) {
	if len(b) == 0 || len(b) > 18 {
		return 0, strconv.ErrSyntax
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
		if len(b) == 0 {
			return 0, strconv.ErrSyntax
		}
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, strconv.ErrSyntax
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		n = -n
	}
	return n, nil
}

// statReader reads many /proc/<pid>/stat files through one buffer, with
// a plain open, read and close each: the sweep after every job reads every
// process's, and os.ReadFile's fstat, poller registration and allocations
// made it most of the sweep's cost.
type statReader struct {
	root string
	path []byte
	buf  [4096]byte
}

func newStatReader(procRoot string) *statReader {
	return &statReader{root: procRoot}
}

// read returns pid's stat; name is pid as the directory names it.
func (r *statReader) read(name string) (procStat, error) {
	r.path = append(append(append(r.path[:0], r.root...), '/'), name...)
	r.path = append(r.path, "/stat"...)
	path := string(r.path)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return procStat{}, fmt.Errorf("reading %s: %w", path, err)
	}
	n, err := unix.Read(fd, r.buf[:])
	unix.Close(fd)
	switch {
	case err != nil:
		return procStat{}, fmt.Errorf("reading %s: %w", path, err)
	case n == len(r.buf):
		return procStat{}, fmt.Errorf("reading %s: longer than %d bytes", path, len(r.buf))
	}
	return parseStat(path, r.buf[:n])
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
	b, err := os.ReadFile(path)
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
