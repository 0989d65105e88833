package procscan

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Lineage is what the kernel says about where a process comes from: its
// parent, its process group and session, when it started and as whom it
// runs. Unlike a process's environment, which the process writes itself,
// none of it can be set to another process's value at will: a session id
// is only ever the id of the process that called setsid, a process group
// can only be joined inside one's own session, the parent is whoever
// forked the process (or the reaper it was handed to), and the real UID
// changes only with privilege. So it is what tells whether a process is
// really a job's, where an environment variable merely claims it.
type Lineage struct {
	PID     int
	PPID    int    // field 4 of /proc/<pid>/stat
	PGID    int    // field 5
	Session int    // field 6
	State   byte   // field 3: R, S, Z, ...
	Start   uint64 // field 22: start time in clock ticks since boot
	// UID is the real UID (the first of the Uid: line of
	// /proc/<pid>/status): who started it, which a setuid program it
	// runs does not change.
	UID uint32
}

// errStatusFormat reports a /proc/<pid>/status without a usable Uid line.
var errStatusFormat = errors.New("no Uid line in status")

// ReadLineage reads pid's Lineage from procRoot/<pid>/stat and status.
func ReadLineage(procRoot string, pid int) (Lineage, error) {
	var buf []byte
	dir := procRoot + "/" + strconv.Itoa(pid)
	stat, err := readFile(dir+"/stat", &buf, 4096)
	if err != nil {
		return Lineage{}, fmt.Errorf("reading the lineage of pid %d: %w", pid, err)
	}
	l := Lineage{PID: pid}
	if err := parseLineage(stat, &l); err != nil {
		return Lineage{}, fmt.Errorf("parsing %s/stat: %w", dir, err)
	}
	status, err := readFile(dir+"/status", &buf, 64<<10)
	if err != nil {
		return Lineage{}, fmt.Errorf("reading the lineage of pid %d: %w", pid, err)
	}
	uid, err := realUID(status)
	if err != nil {
		return Lineage{}, fmt.Errorf("parsing %s/status: %w", dir, err)
	}
	l.UID = uid
	return l, nil
}

// parseLineage fills l's stat fields from a /proc/<pid>/stat line, counting
// fields from the last ')' as parseStartTime does.
func parseLineage(stat []byte, l *Lineage) error {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return errStatFormat
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return errStatFormat
	}
	var v [3]uint64
	for k := range v {
		n, ok := parseUint(f[1+k], 1<<31-1)
		if !ok {
			return errStatFormat
		}
		v[k] = n
	}
	start, ok := parseUint(f[19], 1<<64-1)
	if !ok {
		return errStatFormat
	}
	l.State, l.PPID, l.PGID, l.Session, l.Start = f[0][0], int(v[0]), int(v[1]), int(v[2]), start
	return nil
}

// realUID returns the real UID of a /proc/<pid>/status text.
func realUID(status []byte) (uint32, error) {
	for _, line := range strings.Split(string(status), "\n") {
		rest, ok := strings.CutPrefix(line, "Uid:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, errStatusFormat
		}
		uid, ok := parseUint([]byte(f[0]), 1<<32-1)
		if !ok {
			return 0, errStatusFormat
		}
		return uint32(uid), nil
	}
	return 0, errStatusFormat
}

// ReadCgroup2 returns pid's cgroup v2 path (the "0::" line of
// procRoot/<pid>/cgroup), or "" when it is in no cgroup v2 hierarchy.
func ReadCgroup2(procRoot string, pid int) (string, error) {
	var buf []byte
	path := procRoot + "/" + strconv.Itoa(pid) + "/cgroup"
	data, err := readFile(path, &buf, maxCgroupRead)
	if err != nil {
		return "", fmt.Errorf("reading the cgroup of pid %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", nil
}

// WithinCgroup reports whether cgroup path p is dir or lies below it.
func WithinCgroup(p, dir string) bool {
	if dir == "" || p == "" {
		return false
	}
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
