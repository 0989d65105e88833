package execjob

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestWire_RequestRoundTrips(t *testing.T) {
	oom := -17
	cpus := func(list ...int) *unix.CPUSet {
		set := new(unix.CPUSet)
		for _, c := range list {
			set.Set(c)
		}
		return set
	}
	for _, req := range []Request{
		{Path: "/bin/true", Argv: []string{"true"}, Dir: "/", CPUs: cpus(0, 1)},
		{Path: "/bin/true", Argv: []string{"true"}, Dir: "/", CPUs: cpus(3, 64, 1023), OOMScoreAdj: &oom},
		{Path: "/bin/true", Argv: []string{"true"}, Dir: "/", CPUs: cpus()},
		{Path: "/bin/bash", Argv: []string{"bash", "-c", "--", "true"}, Dir: "/tmp", Umask: 0o022},
		{Path: "/bin/bash", Argv: []string{"bash", "-c", "--", "echo 'a\tb'\n"}, Env: []string{"A=1", "EMPTY=", "TT_QUEUE_JOB_ID=abc"},
			Dir: "/home/u", Cred: &Cred{UID: 1000, GID: 1000, Groups: []uint32{27, 1000}}, Keyring: true, AuditSession: true, OOMScoreAdj: &oom, Umask: 0o077},
		{Path: "/x", Argv: []string{""}, Dir: "/", Cred: &Cred{UID: 0, GID: 0}},
	} {
		got, err := ReadRequest(bytes.NewReader(req.Encode()))
		if err != nil {
			t.Fatalf("%+v: %v", req, err)
		}
		if !reflect.DeepEqual(got, req) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, req)
		}
	}
}

// The Go byte is not the request's: a reader stops before it, so the
// helper reads it only once every step is taken.
func TestWire_ReadStopsBeforeTheGoByte(t *testing.T) {
	req := Request{Path: "/bin/true", Argv: []string{"true"}, Dir: "/"}
	r := bytes.NewReader(append(req.Encode(), Go))
	if _, err := ReadRequest(r); err != nil {
		t.Fatal(err)
	}
	if b, err := r.ReadByte(); err != nil || b != Go {
		t.Fatalf("after the request: %q, %v; want the Go byte", b, err)
	}
}

func TestWire_BadRequestsAreRefusedByName(t *testing.T) {
	good := (&Request{Path: "/bin/true", Argv: []string{"true"}, Env: []string{"A=1"}, Dir: "/"}).Encode()
	huge := append([]byte(nil), good[:4]...)
	huge = append(huge, 0xff, 0xff, 0xff, 0x7f)
	forgedCount := append([]byte(nil), good...)
	// Argv's count, right after Path ("/bin/true", 4+9 bytes past the head).
	forgedCount[8+13], forgedCount[8+14], forgedCount[8+15], forgedCount[8+16] = 0xff, 0xff, 0xff, 0x0f
	for name, c := range map[string]struct {
		b    []byte
		want string
	}{
		"empty":          {nil, "reading the request"},
		"json":           {[]byte(`{"path":"/bin/true"}`), "different versions"},
		"over the bound": {huge, "over"},
		"cut short":      {good[:len(good)-3], "reading the request"},
		"forged count":   {forgedCount, "a list of"},
		"no program":     {(&Request{Dir: "/"}).Encode(), "without a program"},
		"no directory":   {(&Request{Path: "/bin/true", Argv: []string{"true"}}).Encode(), "without a program or a working directory"},
	} {
		_, err := ReadRequest(bytes.NewReader(c.b))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
	if _, err := ReadRequest(bytes.NewReader(tooManyCPUs())); err == nil || !strings.Contains(err.Error(), "a set of 1032 CPUs, over the 1024") {
		t.Errorf("a set of too many CPUs: %v", err)
	}
	trailing := append([]byte(nil), good...)
	trailing = append(trailing[:8], append(trailing[8:], 'x')...)
	trailing[4]++
	if _, err := ReadRequest(bytes.NewReader(trailing)); err == nil || !strings.Contains(err.Error(), "past its end") {
		t.Errorf("trailing bytes: %v", err)
	}
}

// tooManyCPUs is a request whose CPUs field is a byte longer than a
// helper holds, which Encode never writes.
func tooManyCPUs() []byte {
	b := (&Request{Path: "/bin/true", Argv: []string{"true"}, Dir: "/", Umask: 0o022}).Encode()
	b[len(b)-5] |= flagCPUs // the flags, before the umask
	b = binary.LittleEndian.AppendUint32(b, uint32(maxCPUBytes+1))
	b = append(b, make([]byte, maxCPUBytes+1)...)
	binary.LittleEndian.PutUint32(b[4:8], uint32(len(b)-8))
	return b
}

func TestWire_StatusLines(t *testing.T) {
	for _, st := range []Status{
		{Stage: StageSetup},
		{Stage: StageChdir, Errno: syscall.EACCES},
		{Stage: StageReady, Msg: ErrCancelled.Error()},
	} {
		line := st.Line()
		if !bytes.HasSuffix(line, []byte("\n")) || bytes.Count(line, []byte("\n")) != 1 {
			t.Fatalf("%+v: line %q", st, line)
		}
		got, err := ParseStatus(strings.TrimSuffix(string(line), "\n"))
		if err != nil || got != st {
			t.Errorf("%q: %+v, %v; want %+v", line, got, err, st)
		}
		if st.Errno != 0 && !errors.Is(got.Errno, syscall.EACCES) {
			t.Errorf("errno lost: %+v", got)
		}
	}
	// A message cannot break the one-line framing.
	st := Status{Stage: StageSetup, Msg: "line one\nline\ttwo"}
	got, err := ParseStatus(strings.TrimSuffix(string(st.Line()), "\n"))
	if err != nil || got.Msg != "line one line two" {
		t.Errorf("%+v, %v", got, err)
	}
	for _, bad := range []string{"", "chdir\terrno\tx", "chdir\terrno\t0", "chdir\tcolour\tred"} {
		if _, err := ParseStatus(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func FuzzReadRequest(f *testing.F) {
	f.Add((&Request{Path: "/bin/true", Argv: []string{"true"}, Dir: "/", Cred: &Cred{UID: 1, Groups: []uint32{2}}}).Encode())
	f.Add([]byte("qx2\x00\x04\x00\x00\x00\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := ReadRequest(bytes.NewReader(b))
		if err != nil {
			return
		}
		again, err := ReadRequest(bytes.NewReader(req.Encode()))
		if err != nil || !reflect.DeepEqual(again, req) {
			t.Fatalf("%+v re-encoded reads %+v, %v", req, again, err)
		}
	})
}
