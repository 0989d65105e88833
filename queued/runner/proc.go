package runner

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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
