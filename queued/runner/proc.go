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
	state byte   // field 3: R, S, Z, ...
	pgrp  int    // field 5
	start uint64 // field 22: start time in clock ticks since boot
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
	start, err2 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil {
		return procStat{}, fmt.Errorf("parsing %s: bad pgrp or start time", path)
	}
	return procStat{state: f[0][0], pgrp: pgrp, start: start}, nil
}

// StartTime returns field 22 of <procRoot>/<pid>/stat: when the process
// started, in clock ticks since boot.
func StartTime(procRoot string, pid int) (uint64, error) {
	st, err := readStat(procRoot, pid)
	return st.start, err
}
