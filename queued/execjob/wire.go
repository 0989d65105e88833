package execjob

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The wire between queued and its helper is a few length-prefixed
// fields and one text line per status, not JSON: a helper is a fresh
// process every time, and decoding a request with encoding/json's
// reflection, cold, took 0.17 ms of a dispatch's critical path on our
// machines (issue 41), more than every step of the helper together.
//
// Request, on descriptor 3: the magic "qx2\x00", the body's length
// (uint32, little endian), the body, then one byte, Go. The body is, in
// order: Path, Argv, Env, Dir, the flags (a byte: Cred, Keyring,
// AuditSession, OOMScoreAdj, CPUs present), Umask, then Cred's uid, gid
// and groups, OOMScoreAdj and CPUs where present. CPUs is a string of at
// most maxCPUBytes bytes, CPU n being bit n%8 of byte n/8. A string is its length (uint32)
// and its bytes; a list is its count (uint32) and its strings. The
// helper takes every step up to the execve, reports StageReady and reads
// the Go byte: anything else, or the end of the descriptor, means the
// program must not run, and the helper exits. So queued can hand a
// helper its request while the job's start is still being committed,
// and a queued that dies meanwhile runs nothing.
//
// Status, on descriptor 4, a line each: "stage", or "stage\terrno\tN",
// or "stage\tmsg\ttext" (tabs and newlines in text become spaces).

// wireMagic begins every request, so a helper of another version
// refuses what it cannot read rather than misread it.
const wireMagic = "qx2\x00"

// Go is the byte that lets a helper that is ready execute its program.
const Go = 'g'

// request flags
const (
	flagCred = 1 << iota
	flagKeyring
	flagAudit
	flagOOM
	flagCPUs
)

// maxCPUBytes bounds the CPUs field: the CPUs a unix.CPUSet (and C's
// cpu_set_t) holds.
const maxCPUBytes = len(unix.CPUSet{}) * 8

// ErrCancelled is the helper's reason for not running its program: the
// request's Go byte never came.
var ErrCancelled = errors.New("the start was called off before the program ran")

// Encode is req on the wire, without its Go byte.
func (req *Request) Encode() []byte {
	var flags byte
	if req.Cred != nil {
		flags |= flagCred
	}
	if req.Keyring {
		flags |= flagKeyring
	}
	if req.AuditSession {
		flags |= flagAudit
	}
	if req.OOMScoreAdj != nil {
		flags |= flagOOM
	}
	if req.CPUs != nil {
		flags |= flagCPUs
	}
	w := wireWriter{b: make([]byte, 8, 256+len(req.Path)+len(req.Dir)+sizeOf(req.Argv)+sizeOf(req.Env))}
	w.str(req.Path)
	w.strs(req.Argv)
	w.strs(req.Env)
	w.str(req.Dir)
	w.b = append(w.b, flags)
	w.u32(uint32(req.Umask))
	if c := req.Cred; c != nil {
		w.u32(c.UID)
		w.u32(c.GID)
		w.u32(uint32(len(c.Groups)))
		for _, g := range c.Groups {
			w.u32(g)
		}
	}
	if req.OOMScoreAdj != nil {
		w.u32(uint32(int32(*req.OOMScoreAdj)))
	}
	if req.CPUs != nil {
		w.str(string(cpuBytes(req.CPUs)))
	}
	copy(w.b, wireMagic)
	binary.LittleEndian.PutUint32(w.b[4:8], uint32(len(w.b)-8))
	return w.b
}

// cpuBytes is set as the wire has it, up to its last CPU.
func cpuBytes(set *unix.CPUSet) []byte {
	b := make([]byte, maxCPUBytes)
	n := 0
	for cpu := range maxCPUBytes * 8 {
		if set.IsSet(cpu) {
			b[cpu/8] |= 1 << (cpu % 8)
			n = cpu/8 + 1
		}
	}
	return b[:n]
}

// cpuSet is the set the wire's bytes b name.
func cpuSet(b []byte) *unix.CPUSet {
	set := new(unix.CPUSet)
	for cpu := range len(b) * 8 {
		if b[cpu/8]&(1<<(cpu%8)) != 0 {
			set.Set(cpu)
		}
	}
	return set
}

func sizeOf(list []string) int {
	n := 4
	for _, s := range list {
		n += 4 + len(s)
	}
	return n
}

type wireWriter struct{ b []byte }

func (w *wireWriter) u32(v uint32) { w.b = binary.LittleEndian.AppendUint32(w.b, v) }
func (w *wireWriter) str(s string) { w.u32(uint32(len(s))); w.b = append(w.b, s...) }
func (w *wireWriter) strs(list []string) {
	w.u32(uint32(len(list)))
	for _, s := range list {
		w.str(s)
	}
}

// ReadRequest reads one request from r, up to and not including its Go
// byte, and checks it names a program and a working directory.
func ReadRequest(r io.Reader) (Request, error) {
	var req Request
	var head [8]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return req, fmt.Errorf("reading the request: %w", err)
	}
	if string(head[:4]) != wireMagic {
		return req, fmt.Errorf("the request begins %q, not %q: queued and its exec helper are of different versions", head[:4], wireMagic)
	}
	n := binary.LittleEndian.Uint32(head[4:])
	if n > maxRequest {
		return req, fmt.Errorf("request of %d bytes, over %d", n, maxRequest)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return req, fmt.Errorf("reading the request: %w", err)
	}
	if err := req.decode(body); err != nil {
		return req, fmt.Errorf("decoding the request: %w", err)
	}
	if req.Path == "" || len(req.Argv) == 0 || req.Dir == "" {
		return req, errors.New("request without a program or a working directory")
	}
	return req, nil
}

// decode fills req from a request's body.
func (req *Request) decode(body []byte) error {
	d := wireReader{b: body}
	req.Path = d.str()
	req.Argv = d.strs()
	req.Env = d.strs()
	req.Dir = d.str()
	flags := d.byte()
	req.Umask = int(d.u32())
	req.Keyring, req.AuditSession = flags&flagKeyring != 0, flags&flagAudit != 0
	if flags&flagCred != 0 {
		c := &Cred{UID: d.u32(), GID: d.u32()}
		if n := d.count(4); n > 0 {
			c.Groups = make([]uint32, n)
			for i := range c.Groups {
				c.Groups[i] = d.u32()
			}
		}
		req.Cred = c
	}
	if flags&flagOOM != 0 {
		v := int(int32(d.u32()))
		req.OOMScoreAdj = &v
	}
	if flags&flagCPUs != 0 {
		b := d.take(int(d.u32()))
		if d.err == nil && len(b) > maxCPUBytes {
			return fmt.Errorf("a set of %d CPUs, over the %d a helper holds", len(b)*8, maxCPUBytes*8)
		}
		req.CPUs = cpuSet(b)
	}
	switch {
	case d.err != nil:
		return d.err
	case len(d.b) != 0:
		return fmt.Errorf("%d bytes past its end", len(d.b))
	}
	return nil
}

// wireReader takes fields off the front of b; the first short read sets
// err and every later field reads empty.
type wireReader struct {
	b   []byte
	err error
}

func (d *wireReader) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = fmt.Errorf("a field of %d bytes where %d are left", n, len(d.b))
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *wireReader) byte() byte {
	if b := d.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *wireReader) u32() uint32 {
	if b := d.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

// count is a list's length, checked against the bytes left at least
// min bytes an element, so a forged count allocates nothing.
func (d *wireReader) count(min int) int {
	n := int(d.u32())
	if d.err == nil && n > len(d.b)/min {
		d.err = fmt.Errorf("a list of %d where %d bytes are left", n, len(d.b))
	}
	if d.err != nil {
		return 0
	}
	return n
}

func (d *wireReader) str() string { return string(d.take(int(d.u32()))) }

func (d *wireReader) strs() []string {
	n := d.count(4)
	if n == 0 {
		return nil
	}
	list := make([]string, n)
	for i := range list {
		list[i] = d.str()
	}
	return list
}

// Line is st as its status line, newline included.
func (st Status) Line() []byte {
	var b strings.Builder
	b.WriteString(st.Stage)
	switch {
	case st.Errno != 0:
		b.WriteString("\terrno\t")
		b.WriteString(strconv.FormatUint(uint64(st.Errno), 10))
	case st.Msg != "":
		b.WriteString("\tmsg\t")
		b.WriteString(strings.Map(func(r rune) rune {
			if r == '\t' || r == '\n' || r == '\r' {
				return ' '
			}
			return r
		}, st.Msg))
	}
	b.WriteByte('\n')
	return []byte(b.String())
}

// ParseStatus reads one status line (without its newline).
func ParseStatus(line string) (Status, error) {
	stage, rest, _ := strings.Cut(line, "\t")
	st := Status{Stage: stage}
	if stage == "" {
		return st, errors.New("a status line without a stage")
	}
	kind, val, _ := strings.Cut(rest, "\t")
	switch kind {
	case "":
	case "errno":
		n, err := strconv.ParseUint(val, 10, 32)
		if err != nil || n == 0 {
			return st, fmt.Errorf("status %q: bad errno %q", stage, val)
		}
		st.Errno = syscall.Errno(n)
	case "msg":
		st.Msg = val
	default:
		return st, fmt.Errorf("status %q: unknown field %q", stage, kind)
	}
	return st, nil
}
