package execjob

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ttkit/ttkit/internal/cputest"
	"github.com/ttkit/ttkit/internal/usertest"
)

// queued-exec is built two ways: with cgo its steps are taken in C before
// the Go runtime starts (cmd/queued-exec/start.c), without cgo by this
// package. These tests run both builds on the same requests and hold the
// C steps to the Go ones: the same status lines, the same exit status,
// and a program that finds the same process around it (its ids, groups,
// umask, directory, OOM score, audit session, keyring, signals and
// descriptors).

// probeEnv makes this test binary the program the helpers start: it
// prints what it finds of its process and exits.
const probeEnv = "EXECJOB_TEST_PROBE"

func TestMain(m *testing.M) {
	if os.Getenv(probeEnv) != "" {
		os.Exit(probe())
	}
	code := m.Run()
	if dir := builtIn.Load(); dir != nil {
		os.RemoveAll(*dir)
	}
	os.Exit(code)
}

// builtIn is the directory the helpers were built into, if they were.
var builtIn atomic.Pointer[string]

// probe writes the program's view of its process, a line each, for the
// two helpers' programs to be compared line by line.
func probe() int {
	var w bytes.Buffer
	line := func(k string, v any) { fmt.Fprintf(&w, "%s=%v\n", k, v) }
	r, e, s := unix.Getresuid()
	line("uid", fmt.Sprint(r, e, s))
	r, e, s = unix.Getresgid()
	line("gid", fmt.Sprint(r, e, s))
	groups, _ := unix.Getgroups()
	line("groups", groups)
	m := unix.Umask(0)
	line("umask", fmt.Sprintf("%04o", m))
	wd, _ := os.Getwd()
	line("cwd", wd)
	for _, f := range []string{"oom_score_adj", "loginuid"} {
		b, _ := os.ReadFile("/proc/self/" + f)
		line(f, strings.TrimSpace(string(b)))
	}
	sess, _ := os.ReadFile("/proc/self/sessionid")
	line("own audit session", strings.TrimSpace(string(sess)) != os.Getenv("PARENT_SESSION"))
	id, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false)
	desc, _ := unix.KeyctlString(unix.KEYCTL_DESCRIBE, id)
	line("own keyring", err == nil && strconv.Itoa(id) != os.Getenv("PARENT_KEYRING"))
	if i := strings.Index(desc, ";"); i >= 0 {
		desc = desc[i+1:] // uid;gid;perm;description
	}
	line("keyring", desc)
	status, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(status), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && (k == "SigIgn" || k == "SigBlk" || k == "NoNewPrivs" || k == "Cpus_allowed_list") {
			line(k, strings.TrimSpace(v))
		}
	}
	fds, _ := os.ReadDir("/proc/self/fd")
	var open []string
	for _, fd := range fds {
		// The directory being read is one, and the Go runtime opens its
		// poller and its cgroup's CPU limit: not the program's inheritance.
		t, err := os.Readlink("/proc/self/fd/" + fd.Name())
		if err == nil && !strings.HasPrefix(t, "/proc/") && !strings.HasPrefix(t, "anon_inode:") && !strings.HasPrefix(t, "/sys/fs/cgroup/") {
			open = append(open, fd.Name())
		}
	}
	line("fds", open)
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PARENT_") })
	line("env", env)
	line("args", os.Args[1:])
	os.Stdout.Write(w.Bytes())
	return 0
}

// builtEnv passes the built helpers' directory from a fuzzing run's
// coordinator to its workers, which then build nothing and leave nothing
// behind when they are stopped.
const builtEnv = "EXECJOB_TEST_HELPERS"

var helpers = sync.OnceValues(func() (map[string]string, error) {
	bins := map[string]string{}
	if dir := os.Getenv(builtEnv); dir != "" {
		for _, name := range []string{"go", "c"} {
			bins[name] = filepath.Join(dir, name, "queued-exec")
		}
		return bins, nil
	}
	dir, err := os.MkdirTemp("", "execjob-helpers-")
	if err != nil {
		return nil, err
	}
	builtIn.Store(&dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	os.Setenv(builtEnv, dir)
	for name, cgo := range map[string]string{"go": "0", "c": "1"} {
		bin := filepath.Join(dir, name, "queued-exec")
		cmd := exec.Command("go", "build", "-o", bin, "github.com/ttkit/ttkit/queued/cmd/queued-exec")
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building queued-exec with CGO_ENABLED=%s: %w\n%s", cgo, err, out)
		}
		os.Chmod(filepath.Dir(bin), 0o755)
		bins[name] = bin
	}
	return bins, nil
})

// bothHelpers is the two builds of queued-exec, Go's first.
func bothHelpers(t testing.TB) [][2]string {
	t.Helper()
	bins, err := helpers()
	if err != nil {
		t.Fatal(err)
	}
	return [][2]string{{"go", bins["go"]}, {"c", bins["c"]}}
}

// outcome is what one helper made of one request.
type outcome struct {
	statuses []string // stage, and errno or "msg"
	msgs     []string
	exit     int
	out      string // the probe's report, or the program's output
}

func (o outcome) String() string {
	return fmt.Sprintf("statuses %q, exit %d, output:\n%s", o.statuses, o.exit, o.out)
}

// startHelper starts the helper at bin as queued does (a session of its
// own, no environment, the request's read end on 3 and the status pipe's
// write end on 4, then extra), its output into out, and returns it with
// the request's write end and the status pipe's read end.
func startHelper(t *testing.T, bin string, out io.Writer, extra ...*os.File) (*exec.Cmd, *os.File, *os.File) {
	t.Helper()
	rr, rw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	sr, sw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Args[0] = Name
	cmd.ExtraFiles = append([]*os.File{rr, sw}, extra...)
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rr.Close()
	sw.Close()
	return cmd, rw, sr
}

// drive runs the helper at bin on req (then the bytes after, such as the
// Go byte, then the end of the request descriptor), with extra as its
// descriptors above the status pipe, and returns what it did.
func drive(t *testing.T, bin string, req, after []byte, extra ...*os.File) outcome {
	t.Helper()
	var out bytes.Buffer
	cmd, rw, sr := startHelper(t, bin, &out, extra...)
	defer sr.Close()
	go func() {
		rw.Write(req)
		rw.Write(after)
		rw.Close()
	}()
	lines, _ := io.ReadAll(sr)
	err := cmd.Wait()
	var o outcome
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatal(err)
		}
		o.exit = ee.ExitCode()
	}
	for _, l := range strings.Split(strings.TrimSuffix(string(lines), "\n"), "\n") {
		st, err := ParseStatus(l)
		if err != nil {
			t.Fatalf("%s: status line %q: %v", bin, l, err)
		}
		switch {
		case st.Errno != 0:
			o.statuses = append(o.statuses, st.Stage+" "+st.Errno.Error())
		case st.Msg != "":
			o.statuses = append(o.statuses, st.Stage+" msg")
			o.msgs = append(o.msgs, st.Msg)
		default:
			o.statuses = append(o.statuses, st.Stage)
		}
	}
	o.out = out.String()
	return o
}

// probeRequest is a request that runs this test binary as the probe.
func probeRequest(t *testing.T, exe, dir string) Request {
	t.Helper()
	sess, _ := os.ReadFile("/proc/self/sessionid")
	ring, _ := unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false)
	return Request{Path: exe, Argv: []string{"probe", "an arg", ""}, Dir: dir, Umask: 0o027,
		Env: []string{probeEnv + "=1", "A=1", "EMPTY=", "PARENT_SESSION=" + strings.TrimSpace(string(sess)), "PARENT_KEYRING=" + strconv.Itoa(ring)}}
}

// same runs req on both helpers and wants the same outcome, each message
// holding want; it returns Go's.
func same(t *testing.T, req, after []byte, want string, extra ...*os.File) outcome {
	t.Helper()
	var got [2]outcome
	for i, h := range bothHelpers(t) {
		got[i] = drive(t, h[1], req, after, extra...)
		for _, m := range got[i].msgs {
			if !strings.Contains(m, want) {
				t.Errorf("the %s helper says %q, want it to say %q", h[0], m, want)
			}
		}
	}
	if !slices.Equal(got[0].statuses, got[1].statuses) || got[0].exit != got[1].exit || got[0].out != got[1].out {
		t.Errorf("the helpers differ:\n go: %v\n  c: %v", got[0], got[1])
	}
	return got[0]
}

func TestHelpers_StartTheProgramAlike(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	oom := 500
	req := probeRequest(t, exe, dir)
	req.OOMScoreAdj, req.Keyring, req.AuditSession = &oom, true, true
	// A descriptor above the status pipe, and signals ignored by whoever
	// started queued: none of them reaches the program.
	stray, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer stray.Close()
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)
	defer signal.Reset(syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)
	o := same(t, req.Encode(), []byte{Go}, "", stray)
	want := []string{"setup", "chdir", "ready", "exec"}
	if !slices.Equal(o.statuses, want) || o.exit != 0 {
		t.Fatalf("got %v, want statuses %q and exit 0", o, want)
	}
	for _, l := range []string{"umask=0027", "cwd=" + dir, "oom_score_adj=500", "own keyring=true", "SigIgn=0000000000000000",
		"SigBlk=0000000000000000", "fds=[0 1 2]", "args=[an arg ]", "env=[" + probeEnv + "=1 A=1 EMPTY=]"} {
		if !strings.Contains(o.out, l+"\n") {
			t.Errorf("the program found no %q in:\n%s", l, o.out)
		}
	}
}

func TestHelpers_RefuseBadRequestsAlike(t *testing.T) {
	good := (&Request{Path: "/bin/true", Argv: []string{"true"}, Env: []string{"A=1"}, Dir: "/"}).Encode()
	huge := append(append([]byte(nil), good[:4]...), 0x01, 0x00, 0x00, 0x01) // 16 MiB and one byte
	forged := append([]byte(nil), good...)
	forged[8+13], forged[8+14], forged[8+15], forged[8+16] = 0xff, 0xff, 0xff, 0x0f
	long := append([]byte(nil), good...)
	long = append(long, 0)
	long[4]++
	for name, c := range map[string]struct {
		req, after []byte
		want       string // in the message, or the errno line
	}{
		"empty":           {nil, nil, "reading the request: EOF"},
		"json":            {[]byte(`{"path":"/bin/true"}`), nil, "different versions"},
		"over the bound":  {huge, nil, "over 16777216"},
		"cut short":       {good[:len(good)-3], nil, "reading the request: unexpected EOF"},
		"forged count":    {forged, nil, "a list of"},
		"past its end":    {long, nil, "1 bytes past its end"},
		"no program":      {(&Request{Dir: "/"}).Encode(), nil, "without a program"},
		"no directory":    {(&Request{Path: "/bin/true", Argv: []string{"true"}}).Encode(), nil, "without a program or a working directory"},
		"no Go byte":      {good, nil, ErrCancelled.Error()},
		"another byte":    {good, []byte("x"), ErrCancelled.Error()},
		"no such dir":     {(&Request{Path: "/bin/true", Argv: []string{"true"}, Dir: "/nonexistent/dir"}).Encode(), []byte{Go}, "chdir no such file or directory"},
		"NUL in the dir":  {(&Request{Path: "/bin/true", Argv: []string{"true"}, Dir: "/\x00tmp"}).Encode(), []byte{Go}, "chdir invalid argument"},
		"NUL in an arg":   {(&Request{Path: "/bin/true", Argv: []string{"true", "a\x00b"}, Dir: "/"}).Encode(), []byte{Go}, "exec invalid argument"},
		"NUL in the env":  {(&Request{Path: "/bin/true", Argv: []string{"true"}, Env: []string{"A=\x00"}, Dir: "/"}).Encode(), []byte{Go}, "exec invalid argument"},
		"no such program": {(&Request{Path: "/nonexistent/prog", Argv: []string{"prog"}, Dir: "/"}).Encode(), []byte{Go}, "exec no such file or directory"},
		"not a program":   {(&Request{Path: "/etc", Argv: []string{"etc"}, Dir: "/"}).Encode(), []byte{Go}, "exec permission denied"},
		"too many CPUs":   {tooManyCPUs(), []byte{Go}, "a set of 1032 CPUs, over the 1024 a helper holds"},
		"no CPU":          {(&Request{Path: "/bin/true", Argv: []string{"true"}, Dir: "/", CPUs: &unix.CPUSet{}}).Encode(), []byte{Go}, "setup invalid argument"},
	} {
		t.Run(name, func(t *testing.T) {
			o := same(t, c.req, c.after, c.want)
			if o.exit != FailCode {
				t.Errorf("exit %d, want %d: %v", o.exit, FailCode, o)
			}
			if len(o.msgs) == 0 && !slices.Contains(o.statuses, c.want) {
				t.Errorf("got %v, want a status %q", o, c.want)
			}
		})
	}
}

// A queued kept to one CPU hands its helper the CPUs it started with
// (package cpupin): both set them before the program runs, and without
// them the program has the helper's.
func TestHelpers_GiveTheProgramItsCPUsAlike(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	last := cputest.Last(cputest.Ours(t))
	req := probeRequest(t, exe, t.TempDir())
	req.CPUs = new(unix.CPUSet)
	req.CPUs.Set(last)
	o := same(t, req.Encode(), []byte{Go}, "")
	if want := fmt.Sprintf("Cpus_allowed_list=%d\n", last); o.exit != 0 || !strings.Contains(o.out, want) {
		t.Errorf("the program given CPU %d: %v; want %q", last, o, want)
	}
	req.CPUs = nil
	list, err := cputest.Allowed("/proc/self")
	if err != nil {
		t.Fatal(err)
	}
	o = same(t, req.Encode(), []byte{Go}, "")
	if want := "Cpus_allowed_list=" + list + "\n"; o.exit != 0 || !strings.Contains(o.out, want) {
		t.Errorf("the program given no CPUs: %v; want %q, this process's", o, want)
	}
}

// As root, both helpers become the user the request names, with its
// groups alone, before they enter its directory; a directory the user
// may not enter stops the start there, and root is not had back.
func TestHelpers_BecomeTheUserAlike(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to another user (CI runs as root)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	open := usertest.OpenDir(t)
	probeBin := filepath.Join(open, "probe")
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(probeBin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	// The uid need not exist: the kernel switches to any number.
	const uid, gid, group = 64123, 64124, 64125
	home := filepath.Join(open, "home")
	shut := filepath.Join(open, "shut")
	for _, d := range []string{home, shut} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(home, uid, gid); err != nil {
		t.Fatal(err)
	}
	req := probeRequest(t, probeBin, home)
	req.Cred = &Cred{UID: uid, GID: gid, Groups: []uint32{group}}
	req.Keyring, req.AuditSession = true, true
	o := same(t, req.Encode(), []byte{Go}, "")
	if o.exit != 0 {
		t.Fatalf("got %v, want exit 0", o)
	}
	for _, l := range []string{"uid=64123 64123 64123", "gid=64124 64124 64124", "groups=[64125]", "loginuid=64123",
		"own keyring=true", "keyring=64123;64124;"} {
		if !strings.Contains(o.out, l) {
			t.Errorf("the program found no %q in:\n%s", l, o.out)
		}
	}
	req.Dir = shut
	if o := same(t, req.Encode(), []byte{Go}, ""); !slices.Equal(o.statuses, []string{"setup", "chdir", "chdir permission denied"}) {
		t.Errorf("entering a directory the user may not: %v, want chdir permission denied", o)
	}
	// A request for root keeps root, with no groups but the ones it names.
	root := probeRequest(t, probeBin, open)
	root.Cred = &Cred{UID: 0, GID: 0}
	if o := same(t, root.Encode(), []byte{Go}, ""); !strings.Contains(o.out, "uid=0 0 0\n") || !strings.Contains(o.out, "groups=[]\n") {
		t.Errorf("as root with no groups: %v", o)
	}
}

// An id of all ones is -1 to the kernel, which reads it as "leave this
// id as it is": a request for uid 64123 with gid 4294967295 left the
// program with root's gid, and one for uid 4294967295 stayed root (the
// switch-back check caught that one). Both helpers now check the ids the
// process has after the switch and refuse any that is not the request's.
func TestHelpers_RefuseAnIDTheKernelWouldLeaveUnchanged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to another user (CI runs as root)")
	}
	for _, c := range []Cred{{UID: 64123, GID: ^uint32(0)}, {UID: ^uint32(0), GID: 64124}, {UID: ^uint32(0), GID: ^uint32(0)}} {
		req := Request{Path: "/bin/echo", Argv: []string{"echo", "ran"}, Dir: "/", Cred: &c}
		o := same(t, req.Encode(), []byte{Go}, "not taken")
		if o.exit != FailCode || !slices.Equal(o.statuses, []string{"setup", "setup msg"}) || o.out != "" {
			t.Errorf("uid %d, gid %d: %v; want the start refused before the program", c.UID, c.GID, o)
		}
	}
}

// The cgo build really takes its steps before any Go runs: waiting for
// its Go byte, the C helper is one thread, where the Go runtime has
// started several.
func TestHelpers_TheCBuildRunsNoGoBeforeTheProgram(t *testing.T) {
	req := (&Request{Path: "/bin/true", Argv: []string{"true"}, Dir: "/"}).Encode()
	for _, h := range bothHelpers(t) {
		cmd, rw, sr := startHelper(t, h[1], io.Discard)
		rw.Write(req)
		var seen bytes.Buffer
		buf := make([]byte, 64)
		for !strings.Contains(seen.String(), StageReady+"\n") {
			n, err := sr.Read(buf)
			if err != nil {
				t.Fatalf("%s helper: %v after %q", h[0], err, seen.String())
			}
			seen.Write(buf[:n])
		}
		threads := countThreads(t, cmd.Process.Pid)
		rw.Close()
		cmd.Wait()
		sr.Close()
		if want := h[0] == "c"; (threads == 1) != want {
			t.Errorf("the %s helper waits with %d threads", h[0], threads)
		}
	}
}

func countThreads(t *testing.T, pid int) int {
	t.Helper()
	// The Go runtime has started its monitor thread before main runs.
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(tasks)
}

// Any bytes at all, read by both helpers, end alike: the same status
// lines and exit status, and a message where the Go helper has one. The
// C helper's reading of the request is the part of it most exposed to a
// mistake; the Go one's is checked by FuzzReadRequest. No Go byte is ever
// sent, so whatever a mutated request names, no program runs.
func FuzzHelpersAgree(f *testing.F) {
	oom := 900
	for _, req := range []Request{
		{Path: "/bin/true", Argv: []string{"true"}, Env: []string{"A=1"}, Dir: "/"},
		{Path: "/bin/true", Argv: []string{"true", ""}, Dir: "/tmp", Umask: 0o777, Keyring: true, AuditSession: true, OOMScoreAdj: &oom},
		{Path: "/bin/true", Argv: []string{"true"}, Dir: "/", Cred: &Cred{UID: 64123, GID: 64124, Groups: []uint32{1, 2}}},
		{Path: "/bin/true", Argv: []string{"true"}, Dir: "/", CPUs: &unix.CPUSet{0b101}},
	} {
		f.Add(req.Encode())
	}
	f.Add([]byte("qx2\x00\x04\x00\x00\x00\xff\xff\xff\xff"))
	f.Add([]byte("qx2\x00\x00\x00\x00\x00"))
	if _, err := helpers(); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		same(t, b, nil, "")
	})
}
