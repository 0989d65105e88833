package procscan

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/ttkit/ttkit/internal/friendlyname"
	"github.com/ttkit/ttkit/internal/procthread"
)

// Source says where an Identity came from.
type Source uint8

const (
	// SourceCmdline means /proc/<pid>/cmdline was read and was not empty.
	SourceCmdline Source = iota + 1
	// SourceComm means the cmdline was empty or unreadable (a kernel thread,
	// a zombie) and /proc/<pid>/comm named the process instead.
	SourceComm
	// SourcePID means neither could be read (an unprivileged reader, a /proc
	// mounted with hidepid, a process that exited mid-scan), so both labels
	// are the decimal PID rather than empty.
	SourcePID
)

// String returns the procfs file the Identity came from, or "pid".
func (s Source) String() string {
	switch s {
	case SourceCmdline:
		return "cmdline"
	case SourceComm:
		return "comm"
	case SourcePID:
		return "pid"
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// Identity is how a process is named, read from procfs in one pass when its
// PID is first seen (or is found to name a new process) and never re-read
// afterwards, so labels built from it never change for the same process.
type Identity struct {
	// PID is the process the identity was read for.
	PID int
	// CommandLine is the sanitized (see Sanitize) and, when Options.Redact is
	// set, redacted command line; the comm value for SourceComm; the decimal
	// PID for SourcePID; Unknown when the cmdline was empty after sanitizing.
	CommandLine string
	// FriendlyName is friendlyname.Derive(CommandLine) for SourceCmdline, and
	// CommandLine itself otherwise: a comm value is not a command line, so it
	// is returned as-is rather than basenamed.
	FriendlyName string
	// Source says which of the above applies.
	Source Source
	// StartTime is field 22 of /proc/<pid>/stat, the process start time in
	// clock ticks since boot, or 0 when the stat file could not be read. A
	// pending identity carries it when it is known: the PID was seen to
	// pass to another process whose name is still being read.
	// Together with PID it identifies a process across PID reuse.
	StartTime uint64
	// Pending reports a PID-fallback identity given because the read of the
	// process's identity had not finished when the scan ended (see
	// Options.ReadTimeout). A later scan names the process once the read
	// returns, so a caller should treat it as provisional.
	Pending bool
	// Err says why Source is SourcePID (ErrReadPending when Pending); nil
	// otherwise.
	Err error
	// Attribution says whose the process is, as far as
	// Options.Attribution asks; read in the same pass as the rest.
	Attribution Attribution
}

// errStatFormat reports a /proc/<pid>/stat line without a start time.
var errStatFormat = errors.New("no start time (field 22) in stat")

// parseStartTime returns field 22 of a /proc/<pid>/stat line. The fields are
// counted from the LAST ')' because field 2, the comm in parentheses, may
// itself hold spaces and parentheses.
func parseStartTime(stat []byte) (uint64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errStatFormat
	}
	// After the ')' come " S ppid ...": count spaces to field 22.
	field, from := 2, 0
	for j := i + 1; j < len(stat); j++ {
		if c := stat[j]; c != ' ' && c != '\n' {
			continue
		}
		field++
		switch field {
		case 22:
			from = j + 1
		case 23:
			return parseStart(stat[from:j])
		}
	}
	if field != 22 {
		return 0, errStatFormat
	}
	return parseStart(stat[from:])
}

// parseStart parses the start time field.
func parseStart(b []byte) (uint64, error) {
	v, ok := parseUint(b, math.MaxUint64)
	if !ok {
		return 0, errStatFormat
	}
	return v, nil
}

// parseUint parses a non-empty run of ASCII digits no greater than limit
// without allocating.
func parseUint(b []byte, limit uint64) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (limit-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// readIdentity reads the naming half of an Identity for pid from the
// directory dir (/proc/<pid>): cmdline, else comm, else the PID itself.
func (r *reader) readIdentity(pid int, dir string) Identity {
	cmdlinePath := dir + "/cmdline"
	raw, cmdlineErr := readCmdline(cmdlinePath, &r.buf)
	if cmdlineErr == nil && len(raw) > 0 {
		return r.cmdlineIdentity(pid, raw)
	}
	if cmdlineErr == nil {
		// Empty: a kernel thread, a zombie, or a process whose main
		// thread exited while another runs on (see procthread).
		if procthread.Other(dir, func(td string) bool {
			var err error
			raw, err = readCmdline(td+"/cmdline", &r.buf)
			return err == nil && len(raw) > 0
		}) != "" {
			return r.cmdlineIdentity(pid, raw)
		}
		cmdlineErr = fmt.Errorf("%s is empty", cmdlinePath)
	}

	commPath := dir + "/comm"
	raw, commErr := readFile(commPath, &r.buf, maxCommRead)
	if commErr == nil {
		raw = bytes.TrimSuffix(raw, []byte("\n"))
		comm := Sanitize(raw)
		if comm == "" && len(raw) > 0 {
			// Read, but nothing printable: the spec's answer for a name
			// that sanitizes to nothing, not the PID.
			comm = Unknown
		}
		if comm != "" {
			return Identity{PID: pid, CommandLine: comm, FriendlyName: comm, Source: SourceComm}
		}
		commErr = fmt.Errorf("%s is empty", commPath)
	}

	p := strconv.Itoa(pid)
	return Identity{PID: pid, CommandLine: p, FriendlyName: p, Source: SourcePID,
		Err: errors.Join(cmdlineErr, commErr)}
}

// cmdlineIdentity names a process from its non-empty raw cmdline. The redact
// hook sees the sanitized command line with ArgSpace for spaces inside an
// argument, and its output is sanitized again so that whatever it returns
// keeps the label bounds; the friendly name is then derived from exactly the
// command line reported, so one is always a substring of the other, and is
// never a redacted token when another can be had.
func (r *reader) cmdlineIdentity(pid int, raw []byte) Identity {
	var cl string
	if r.redact == nil {
		cl = Sanitize(raw)
	} else if marked := sanitize(raw, ArgSpace); marked != "" {
		cl = Sanitize([]byte(strings.ReplaceAll(r.redact(marked), string(rune(ArgSpace)), " ")))
	}
	if cl == "" {
		return Identity{PID: pid, CommandLine: Unknown, FriendlyName: Unknown, Source: SourceCmdline}
	}
	name := friendlyname.Derive(cl)
	if r.redact != nil && strings.Contains(name, RedactedMark) {
		if better := friendlyname.Derive(withoutRedacted(cl)); better != Unknown && !strings.Contains(better, RedactedMark) {
			name = better
		}
	}
	return Identity{PID: pid, CommandLine: cl, FriendlyName: name, Source: SourceCmdline}
}

// withoutRedacted drops the tokens of cl that hold RedactedMark. Every token
// left is still a token of cl.
func withoutRedacted(cl string) string {
	toks := strings.Fields(cl)
	kept := toks[:0]
	for _, tok := range toks {
		if !strings.Contains(tok, RedactedMark) {
			kept = append(kept, tok)
		}
	}
	return strings.Join(kept, " ")
}
