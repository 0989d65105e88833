package procscan

import (
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// fakeHost is a fake driver tree listing PIDs and a fake /proc describing them.
type fakeHost struct {
	driver, proc string
}

func newFakeHost(t *testing.T) fakeHost {
	return fakeHost{driver: t.TempDir(), proc: t.TempDir()}
}

// list makes device 0 list pids, replacing whatever it listed before.
func (h fakeHost) list(t *testing.T, pids ...int) {
	writeFile(t, h.driver, "0/pids", pidLines(pids...))
}

// set writes /proc/<pid>/<name>.
func (h fakeHost) set(t *testing.T, pid int, name, content string) {
	writeFile(t, h.proc, strconv.Itoa(pid)+"/"+name, content)
}

// fakeSelf is the scanner's own PID on a fake host unless a test names
// one: above the kernel's largest pid_max (2^22), so no fake PID is it.
// Left to default, it would be the test binary's PID, which a fake PID
// (400 of them from 10000 in one test) can happen to be, and the scanner
// leaves its own PID out.
const fakeSelf = 1<<22 + 1

func (h fakeHost) scanner(t *testing.T, opts Options) *Scanner {
	opts.DriverPath, opts.ProcPath = h.driver, h.proc
	if opts.SelfPID == 0 {
		opts.SelfPID = fakeSelf
	}
	s := New(opts)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// identities scans once and returns the identity of every process by PID.
func identities(t *testing.T, s *Scanner) map[int]Identity {
	t.Helper()
	res := s.Scan()
	if !res.Complete {
		t.Fatalf("incomplete scan: %v", res.Errors)
	}
	ids := make(map[int]Identity)
	for _, p := range res.Processes {
		ids[p.PID] = p.Identity
	}
	return ids
}

func TestScan_IdentitySources(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	long := "/usr/bin/" + strings.Repeat("x", 291) // 300 bytes
	cases := []struct {
		pid                 int
		stat, cmdline, comm string // "-" means the file is absent
		want                Identity
	}{{
		pid: 101, stat: fakeStat(101, "kworker/0:1", 11), cmdline: "", comm: "kworker/0:1\n",
		want: Identity{CommandLine: "kworker/0:1", FriendlyName: "kworker/0:1", Source: SourceComm, StartTime: 11},
	}, {
		pid: 102, stat: "-", cmdline: "-", comm: "-",
		want: Identity{CommandLine: "102", FriendlyName: "102", Source: SourcePID},
	}, {
		pid: 103, stat: fakeStat(103, "python3", 13), cmdline: "python3\x00caf\xc3\xa9\x07.py\x00--x\x00\x00", comm: "python3\n",
		want: Identity{CommandLine: "python3 caf.py --x", FriendlyName: "caf.py", Source: SourceCmdline, StartTime: 13},
	}, {
		pid: 104, stat: fakeStat(104, "x", 14), cmdline: long + "\x00", comm: "x\n",
		want: Identity{CommandLine: long[:256], FriendlyName: long[len("/usr/bin/"):256], Source: SourceCmdline, StartTime: 14},
	}, {
		pid: 105, stat: fakeStat(105, "odd", 15), cmdline: "\x01\x02\xff\x00", comm: "odd\n",
		want: Identity{CommandLine: Unknown, FriendlyName: Unknown, Source: SourceCmdline, StartTime: 15},
	}, {
		pid: 106, stat: fakeStat(106, "a) (b c)", 16), cmdline: "./a) (b c)\x00", comm: "a) (b c)\n",
		want: Identity{CommandLine: "./a) (b c)", FriendlyName: "a)", Source: SourceCmdline, StartTime: 16},
	}, {
		// Readable but empty cmdline and comm: the PID, not an empty label.
		pid: 107, stat: fakeStat(107, "", 17), cmdline: "", comm: "\n",
		want: Identity{CommandLine: "107", FriendlyName: "107", Source: SourcePID, StartTime: 17},
	}, {
		// A comm is returned as-is, not basenamed; control bytes still go.
		pid: 108, stat: "-", cmdline: "-", comm: "a/b\tc\n",
		want: Identity{CommandLine: "a/bc", FriendlyName: "a/bc", Source: SourceComm},
	}}
	var pids []int
	for _, c := range cases {
		pids = append(pids, c.pid)
		for name, content := range map[string]string{"stat": c.stat, "cmdline": c.cmdline, "comm": c.comm} {
			if content != "-" {
				h.set(t, c.pid, name, content)
			}
		}
	}
	h.list(t, pids...)
	ids := identities(t, h.scanner(t, Options{}))
	for _, c := range cases {
		got := ids[c.pid]
		c.want.PID = c.pid
		if c.want.Source == SourcePID && got.Err == nil {
			t.Errorf("pid %d: Err is nil; want the reason for the PID fallback", c.pid)
		}
		got.Err = nil
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("pid %d:\n got %+v\nwant %+v", c.pid, got, c.want)
		}
	}
}

func TestScan_CachedUntilStartTimeChanges(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	h.set(t, 201, "stat", fakeStat(201, "sleep", 100))
	h.set(t, 201, "cmdline", "sleep\x00600\x00")
	h.list(t, 201)
	s := h.scanner(t, Options{})
	if got := identities(t, s)[201]; got.FriendlyName != "sleep" || got.StartTime != 100 {
		t.Fatalf("first scan: %+v", got)
	}

	// Same start time: the cached identity stands even though the cmdline
	// now says otherwise (a program rewriting its argv, say).
	h.set(t, 201, "cmdline", "python3\x00b.py\x00")
	if got := identities(t, s)[201]; got.FriendlyName != "sleep" || got.CommandLine != "sleep 600" {
		t.Errorf("unchanged start time: %+v; want the cached sleep", got)
	}

	// New start time: the PID was reused, the identity is read afresh.
	// (os.WriteFile rewrites the file in place, as the held descriptor needs.)
	h.set(t, 201, "stat", fakeStat(201, "python3", 200))
	if got := identities(t, s)[201]; got.FriendlyName != "b.py" || got.CommandLine != "python3 b.py" || got.StartTime != 200 {
		t.Errorf("changed start time: %+v; want b.py started at 200", got)
	}
}

func TestScan_PIDFallbackStaysUntilStatReadable(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	h.list(t, 301)
	s := h.scanner(t, Options{})
	if got := identities(t, s)[301]; got.Source != SourcePID {
		t.Fatalf("nothing readable: %+v", got)
	}
	// cmdline appears but stat stays unreadable: still the PID.
	h.set(t, 301, "cmdline", "late\x00")
	if got := identities(t, s)[301]; got.Source != SourcePID {
		t.Errorf("stat still unreadable: %+v; want the cached PID fallback", got)
	}
	// Once a start time can be read, it is a process we can name.
	h.set(t, 301, "stat", fakeStat(301, "late", 5))
	if got := identities(t, s)[301]; got.FriendlyName != "late" || got.StartTime != 5 {
		t.Errorf("stat readable: %+v; want late", got)
	}
}

func TestScan_Forgetting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		complete bool
		want     string
	}{
		// A complete scan without the PID forgets it: when it is listed
		// again it is read afresh.
		{"complete", true, "b"},
		// An incomplete scan proves nothing: the entry is kept.
		{"incomplete", false, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newFakeHost(t)
			h.set(t, 401, "stat", fakeStat(401, "a", 1))
			h.set(t, 401, "cmdline", "a\x00")
			h.list(t, 401)
			s := h.scanner(t, Options{})
			s.Scan()

			h.list(t)
			if !tc.complete {
				writeFile(t, h.driver, "1/pids/EISDIR", "")
			}
			if res := s.Scan(); res.Complete != tc.complete || len(res.Processes) != 0 {
				t.Fatalf("middle scan: %+v", res)
			}

			h.set(t, 401, "cmdline", "b\x00")
			h.list(t, 401)
			res := s.Scan()
			if len(res.Processes) != 1 || res.Processes[0].Identity.FriendlyName != tc.want {
				t.Errorf("got %+v; want %s", res.Processes, tc.want)
			}
		})
	}
}

func TestScan_IncompleteScanDropsProvablyGone(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	for _, pid := range []int{501, 502} {
		h.set(t, pid, "stat", fakeStat(pid, "a", 1))
		h.set(t, pid, "cmdline", "a\x00")
	}
	h.list(t, 501, 502)
	s := h.scanner(t, Options{})
	s.Scan()

	// Neither is listed and the scan is incomplete, but 502's start time
	// changed: that process is gone, whatever the unread device says.
	h.list(t)
	writeFile(t, h.driver, "1/pids/EISDIR", "")
	h.set(t, 502, "stat", fakeStat(502, "a", 2))
	s.Scan()
	if _, ok := s.cache[501]; !ok {
		t.Error("501 forgotten; want it kept while unconfirmed")
	}
	if _, ok := s.cache[502]; ok {
		t.Error("502 kept; want it forgotten")
	}
	if err := s.Close(); err != nil || len(s.cache) != 0 || s.held != 0 {
		t.Errorf("after Close: %v, cache %v, held %d", err, s.cache, s.held)
	}
}

func TestScan_Redact(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	h.set(t, 601, "cmdline", "python3\x00secret_job.py\x00--token\x00s3cr3t\x00")
	h.set(t, 602, "comm", "secret_job\n")
	h.list(t, 601, 602)
	var seen []string
	redact := func(cl string) string {
		seen = append(seen, cl)
		cl = strings.ReplaceAll(cl, "s3cr3t", "***")
		return strings.ReplaceAll(cl, "secret_job", "\x01***")
	}
	ids := identities(t, h.scanner(t, Options{Redact: redact}))
	// The hook sees the sanitized line, its output is sanitized again, and
	// the friendly name comes from the redacted line, though not from a
	// redacted token while another is there.
	if got := ids[601]; got.CommandLine != "python3 ***.py --token ***" || got.FriendlyName != "python3" {
		t.Errorf("cmdline identity %+v", got)
	}
	if !reflect.DeepEqual(seen, []string{"python3 secret_job.py --token s3cr3t"}) {
		t.Errorf("Redact called with %q; want the sanitized cmdline only", seen)
	}
	if got := ids[602]; got.CommandLine != "secret_job" {
		t.Errorf("comm identity %+v; want it unredacted", got)
	}
}

func TestParseStartTime(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{fakeStat(1, "init", 0), 0, true},
		{fakeStat(42, "a b", 123456), 123456, true},
		{fakeStat(42, ") ) (", 7), 7, true},
		{fakeStat(42, "x", 18446744073709551615), 18446744073709551615, true},
		{"42 (x) S 1 2 3", 0, false},
		{"42 x S 1", 0, false},
		{"", 0, false},
		{strings.Replace(fakeStat(1, "x", 9), " 9 ", " 9a ", 1), 0, false},
	} {
		got, err := parseStartTime([]byte(tc.in))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseStartTime(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestSanitize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"\x00\x00", ""},
		{"python3\x00train.py\x00", "python3 train.py"},
		{"a  b \x00 \x00", "a  b"},
		{"caf\xc3\xa9\x00\x7f\x1b[31m", "caf [31m"},
		{"\x01\x02\xff", ""},
		// A separator left trailing by a dropped byte or the cut is trimmed.
		{"a\x00\xff", "a"},
		{"\x01\x02\x00\xff\x00", ""},
		{strings.Repeat("a", 255) + "\x00b", strings.Repeat("a", 255)},
		{strings.Repeat("ab", 200), strings.Repeat("ab", 128)},
		{strings.Repeat("\xff", 1000) + "x", "x"},
	} {
		if got := Sanitize([]byte(tc.in)); got != tc.want {
			t.Errorf("Sanitize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestScan_BeyondHeldDescriptorCap(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	h.set(t, 701, "stat", fakeStat(701, "a", 1))
	h.set(t, 701, "cmdline", "a\x00")
	h.list(t, 701)
	s := h.scanner(t, Options{})
	s.held = s.maxHeld // as if the cap were reached by other holders
	if got := identities(t, s)[701]; got.FriendlyName != "a" || s.cache[701].statFD != -1 {
		t.Fatalf("got %+v, fd %d; want a with no held descriptor", got, s.cache[701].statFD)
	}
	// Verified by path instead: cached while the start time holds ...
	h.set(t, 701, "cmdline", "b\x00")
	if got := identities(t, s)[701]; got.FriendlyName != "a" {
		t.Errorf("unchanged start time: %+v; want the cached a", got)
	}
	// ... and read afresh when it changes.
	h.set(t, 701, "stat", fakeStat(701, "b", 2))
	if got := identities(t, s)[701]; got.FriendlyName != "b" || got.StartTime != 2 {
		t.Errorf("changed start time: %+v; want b", got)
	}
	if s.held != s.maxHeld {
		t.Errorf("held = %d; want it untouched at the cap", s.held)
	}
	s.held = 0
}

// The Redact hook sees a space inside one argument as ArgSpace, so that a
// pattern can take a whole argument; the reported line has the space back.
func TestScan_RedactSeesArguments(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	h.set(t, 603, "stat", fakeStat(603, "python3", 3))
	h.set(t, 603, "cmdline", "python3\x00run.py\x00--password\x00correct horse\x00--n\x001 2\x00")
	h.list(t, 603)
	seen := make(chan string, 1)
	redact := func(cl string) string {
		seen <- cl
		return strings.Replace(cl, "correct\x1fhorse", RedactedMark, 1)
	}
	got := identities(t, h.scanner(t, Options{Redact: redact}))[603]
	if want := "python3 run.py --password\x20correct\x1fhorse --n 1\x1f2"; <-seen != want {
		t.Errorf("hook saw another line; want %q", want)
	}
	if got.CommandLine != "python3 run.py --password *** --n 1 2" || got.FriendlyName != "run.py" {
		t.Errorf("identity %+v", got)
	}
}

// A fake host's scanner lists every fake PID, the test binary's own
// included: only fakeSelf is left out.
func TestFakeHost_ListsTheTestsOwnPID(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	self := os.Getpid()
	h.set(t, self, "stat", fakeStat(self, "w", 1))
	h.set(t, self, "cmdline", "worker.py\x00")
	h.list(t, self)
	if ids := identities(t, h.scanner(t, Options{})); ids[self].FriendlyName != "worker.py" {
		t.Errorf("the fake PID %d (the test's own) was not listed: %v", self, ids)
	}
}
