package procscan

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"syscall"
	"testing"
)

func TestScan_RealHolders(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	writeFile(t, work, "train.py", readyScript)
	writeFile(t, work, "tests/test_matmul.py", "def test_matmul():\n    pass\n")
	// pytest is not installed: a package of that name on PYTHONPATH makes
	// "python3 -m pytest ..." a real command line all the same.
	pythonPath := filepath.Join(t.TempDir(), "site")
	writeFile(t, pythonPath, "pytest/__init__.py", "")
	writeFile(t, pythonPath, "pytest/__main__.py", readyScript)

	train, trainCmd := startPython(t, work, nil, "train.py", "--epochs", "3")
	matmul, matmulCmd := startPython(t, work, []string{"PYTHONPATH=" + pythonPath}, "-m", "pytest", "tests/test_matmul.py")
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("taskset not installed")
	}
	sleep := startProcess(t, exec.Command("taskset", "-c", "0", "sleep", "600"), "sleep 600")
	self := os.Getpid()

	driver := t.TempDir()
	// One line per descriptor, newest first, so duplicates are normal.
	writeFile(t, driver, "0/pids", pidLines(matmul, train, self, train, train))
	writeFile(t, driver, "1/pids", pidLines(sleep, 0, train, matmul, 0, sleep))
	writeFile(t, driver, "3/pids", "")
	// Not devices: non-numeric or non-canonical names, and a plain file.
	writeFile(t, driver, "tenstorrent/pids", "garbage\n")
	writeFile(t, driver, "01/pids", "garbage\n")
	writeFile(t, driver, "7", "garbage\n")

	s := New(Options{DriverPath: driver})
	t.Cleanup(func() { _ = s.Close() })
	res := s.Scan()

	if !res.Complete || len(res.Errors) != 0 {
		t.Fatalf("Complete = %v, Errors = %v; want a complete scan", res.Complete, res.Errors)
	}
	wantDevices := []Device{
		{Number: 0, Read: true, Holders: 2},
		{Number: 1, Read: true, Holders: 4, Foreign: true},
		{Number: 3, Read: true},
	}
	if !reflect.DeepEqual(res.Devices, wantDevices) {
		t.Errorf("Devices = %+v\nwant %+v", res.Devices, wantDevices)
	}
	if !res.Foreign || res.ProcessCount() != 4 {
		t.Errorf("Foreign = %v, ProcessCount = %d; want true, 4", res.Foreign, res.ProcessCount())
	}

	want := map[int]struct {
		devices      []int
		commandLine  string
		friendlyName string
	}{
		train:  {[]int{0, 1}, trainCmd, "train.py"},
		matmul: {[]int{0, 1}, matmulCmd, "test_matmul.py"},
		sleep:  {[]int{1}, "sleep 600", "sleep"},
	}
	if len(res.Processes) != len(want) {
		t.Fatalf("got %d processes, want %d: %+v", len(res.Processes), len(want), res.Processes)
	}
	for i, p := range res.Processes {
		if i > 0 && res.Processes[i-1].PID >= p.PID {
			t.Errorf("Processes not sorted by PID: %d before %d", res.Processes[i-1].PID, p.PID)
		}
		w, ok := want[p.PID]
		if !ok {
			t.Errorf("unexpected PID %d (own PID %d)", p.PID, self)
			continue
		}
		id := p.Identity
		if !reflect.DeepEqual(p.Devices, w.devices) || id.CommandLine != w.commandLine ||
			id.FriendlyName != w.friendlyName || id.Source != SourceCmdline || id.PID != p.PID || id.Err != nil {
			t.Errorf("pid %d = %+v %+v\nwant devices %v, command line %q, name %q from cmdline",
				p.PID, p.Devices, id, w.devices, w.commandLine, w.friendlyName)
		}
		if id.StartTime != realStartTime(t, p.PID) {
			t.Errorf("pid %d StartTime = %d, want %d", p.PID, id.StartTime, realStartTime(t, p.PID))
		}
	}

	// A second scan of the same holders gives the same answer from the cache.
	again := s.Scan()
	if !reflect.DeepEqual(again, res) {
		t.Errorf("second scan differs:\n%+v\nfirst:\n%+v", again, res)
	}
}

// realStartTime reads field 22 of a live process's stat.
func realStartTime(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	v, err := parseStartTime(b)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestScan_SelfPID(t *testing.T) {
	t.Parallel()
	driver, proc := t.TempDir(), t.TempDir()
	self := os.Getpid()
	writeFile(t, driver, "0/pids", pidLines(self, 4000001))
	writeFile(t, proc, "4000001/cmdline", "a\x00")
	writeFile(t, proc, strconv.Itoa(self)+"/cmdline", "me\x00")

	res := New(Options{DriverPath: driver, ProcPath: proc}).Scan()
	if got := pidsOf(res); !reflect.DeepEqual(got, []int{4000001}) {
		t.Errorf("default SelfPID: PIDs = %v, want [4000001]", got)
	}
	s := New(Options{DriverPath: driver, ProcPath: proc, SelfPID: 4000001})
	if s.SelfPID() != 4000001 {
		t.Errorf("SelfPID() = %d", s.SelfPID())
	}
	res = s.Scan()
	if got := pidsOf(res); !reflect.DeepEqual(got, []int{self}) || res.Devices[0].Holders != 1 {
		t.Errorf("SelfPID 4000001: PIDs = %v, devices %+v; want [%d], 1 holder", got, res.Devices, self)
	}
}

func pidsOf(res Result) []int {
	var pids []int
	for _, p := range res.Processes {
		pids = append(pids, p.PID)
	}
	return pids
}

func TestScan_OnlyForeignHolders(t *testing.T) {
	t.Parallel()
	driver := t.TempDir()
	// What a collector in a private PID namespace reads: itself as 1, the rest as 0.
	writeFile(t, driver, "0/pids", pidLines(1, 1, 0, 0))
	writeFile(t, driver, "1/pids", pidLines(0))
	res := New(Options{DriverPath: driver, ProcPath: t.TempDir(), SelfPID: 1}).Scan()
	if len(res.Processes) != 0 || !res.Foreign || res.ProcessCount() != 1 || !res.Complete {
		t.Errorf("got %+v; want no processes, Foreign, count 1, complete", res)
	}
	for _, d := range res.Devices {
		if d.Holders != 1 || !d.Foreign {
			t.Errorf("device %+v; want 1 foreign holder", d)
		}
	}
}

func TestScan_DriverMissing(t *testing.T) {
	t.Parallel()
	res := New(Options{DriverPath: filepath.Join(t.TempDir(), "tenstorrent")}).Scan()
	if !res.Complete || len(res.Errors) != 0 || len(res.Devices) != 0 || len(res.Processes) != 0 || res.ProcessCount() != 0 {
		t.Errorf("got %+v; want a complete scan of zero devices", res)
	}
}

func TestScan_DriverUnlistable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	driver := filepath.Join(dir, "tenstorrent")
	writeFile(t, dir, "tenstorrent", "not a directory\n")
	res := New(Options{DriverPath: driver}).Scan()
	var le *ListError
	if res.Complete || len(res.Errors) != 1 || !errors.As(res.Errors[0], &le) || le.Path != driver ||
		!errors.Is(res.Errors[0], syscall.ENOTDIR) {
		t.Fatalf("got %+v; want an incomplete scan with a *ListError for %s wrapping ENOTDIR", res, driver)
	}
}

func TestScan_UnreadablePIDsFile(t *testing.T) {
	t.Parallel()
	driver, proc := t.TempDir(), t.TempDir()
	writeFile(t, driver, "0/pids", pidLines(4000001))
	// Tests run as root, so permissions cannot make a file unreadable; a
	// directory where the file should be fails at once with EISDIR.
	if err := os.MkdirAll(filepath.Join(driver, "2", "pids"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, proc, "4000001/cmdline", "a\x00")

	res := New(Options{DriverPath: driver, ProcPath: proc}).Scan()
	if res.Complete || len(res.Errors) != 1 {
		t.Fatalf("Complete = %v, Errors = %v; want one error", res.Complete, res.Errors)
	}
	var de *DeviceError
	if !errors.As(res.Errors[0], &de) || de.Device != 2 || de.Path != filepath.Join(driver, "2", "pids") ||
		!errors.Is(res.Errors[0], syscall.EISDIR) {
		t.Errorf("error %v; want a *DeviceError for device 2 wrapping EISDIR", res.Errors[0])
	}
	// The readable device still counts.
	want := []Device{{Number: 0, Read: true, Holders: 1}, {Number: 2}}
	if !reflect.DeepEqual(res.Devices, want) || !reflect.DeepEqual(pidsOf(res), []int{4000001}) {
		t.Errorf("Devices = %+v, PIDs = %v; want %+v, [4000001]", res.Devices, pidsOf(res), want)
	}
}

func TestScan_MalformedLine(t *testing.T) {
	t.Parallel()
	driver, proc := t.TempDir(), t.TempDir()
	writeFile(t, driver, "5/pids", "4000001\n4000002\n42abc\n4000003\n")
	writeFile(t, driver, "6/pids", "4000004") // no final newline: fine
	writeFile(t, proc, "4000004/cmdline", "b\x00")

	res := New(Options{DriverPath: driver, ProcPath: proc}).Scan()
	if res.Complete || len(res.Errors) != 1 {
		t.Fatalf("Complete = %v, Errors = %v; want one error", res.Complete, res.Errors)
	}
	var de *DeviceError
	var le *LineError
	if !errors.As(res.Errors[0], &de) || de.Device != 5 || !errors.As(res.Errors[0], &le) || le.Line != 3 || le.Text != "42abc" {
		t.Fatalf("error %v; want device 5, line 3, text 42abc", res.Errors[0])
	}
	// A malformed file contributes no holders at all.
	if !reflect.DeepEqual(pidsOf(res), []int{4000004}) || res.Devices[0].Read || res.Devices[0].Holders != 0 {
		t.Errorf("PIDs = %v, Devices = %+v; want only 4000004 and device 5 unread", pidsOf(res), res.Devices)
	}
}

func TestParsePIDs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		want    []int
		badLine int
		badText string
	}{
		{in: "", want: nil},
		{in: "12\n12\n0\n", want: []int{12, 12, 0}},
		{in: "007\n2147483647", want: []int{7, 2147483647}},
		{in: "1\n\n2\n", badLine: 2, badText: ""},
		{in: "1\n-2\n", badLine: 2, badText: "-2"},
		{in: " 1\n", badLine: 1, badText: " 1"},
		{in: "1\r\n", badLine: 1, badText: "1\r"},
		{in: "2147483648\n", badLine: 1, badText: "2147483648"},
		{in: "1 2\n", badLine: 1, badText: "1 2"},
	} {
		got, err := parsePIDs([]byte(tc.in), nil)
		var le *LineError
		switch {
		case tc.badLine == 0 && (err != nil || !reflect.DeepEqual(got, tc.want)):
			t.Errorf("parsePIDs(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		case tc.badLine != 0 && (!errors.As(err, &le) || le.Line != tc.badLine || le.Text != tc.badText):
			t.Errorf("parsePIDs(%q) error %v; want line %d text %q", tc.in, err, tc.badLine, tc.badText)
		}
	}
}

func TestScan_ZombieFallsBackToComm(t *testing.T) {
	t.Parallel()
	// A child that has exited but not been reaped is a zombie: empty
	// cmdline, comm still there.
	cmd := exec.Command("sh", "-c", "exit 0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { _ = cmd.Wait() })
	waitUntil(t, "the child to become a zombie", func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		return err == nil && string(b[bytesLastParen(b)+2]) == "Z"
	})
	driver := t.TempDir()
	writeFile(t, driver, "0/pids", pidLines(pid))
	s := New(Options{DriverPath: driver})
	t.Cleanup(func() { _ = s.Close() })
	res := s.Scan()
	if len(res.Processes) != 1 {
		t.Fatalf("got %+v", res)
	}
	id := res.Processes[0].Identity
	if id.Source != SourceComm || id.FriendlyName != "sh" || id.CommandLine != "sh" || id.StartTime == 0 {
		t.Errorf("zombie identity %+v; want sh from comm with a start time", id)
	}
}

// TestScan_CommIdentityIsReadAgain: a process caught in the middle of
// execve has an empty cmdline and its new comm, with the start time it
// keeps; the next scan must name it from its arguments, not from a cached
// comm.
func TestScan_CommIdentityIsReadAgain(t *testing.T) {
	t.Parallel()
	driver, proc := t.TempDir(), t.TempDir()
	const pid = 4000002
	writeFile(t, driver, "0/pids", pidLines(pid))
	writeFile(t, proc, "4000002/stat", fakeStat(pid, "python3", 777))
	writeFile(t, proc, "4000002/comm", "python3\n")
	writeFile(t, proc, "4000002/cmdline", "")
	s := New(Options{DriverPath: driver, ProcPath: proc, SelfPID: 1})
	t.Cleanup(func() { _ = s.Close() })

	first := s.Scan()
	if len(first.Processes) != 1 || first.Processes[0].Identity.Source != SourceComm {
		t.Fatalf("mid-exec scan = %+v, want one identity from comm", first.Processes)
	}
	writeFile(t, proc, "4000002/cmdline", "python3\x00train.py\x00")
	id := s.Scan().Processes[0].Identity
	if id.Source != SourceCmdline || id.CommandLine != "python3 train.py" || id.FriendlyName != "train.py" || id.StartTime != 777 {
		t.Errorf("after exec: %+v, want python3 train.py from cmdline, start time 777", id)
	}
	// Once named from its cmdline, the identity is cached again.
	writeFile(t, proc, "4000002/cmdline", "other\x00")
	if id := s.Scan().Processes[0].Identity; id.CommandLine != "python3 train.py" {
		t.Errorf("cached identity re-read: %+v", id)
	}
}

func bytesLastParen(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' {
			return i
		}
	}
	return -1
}

func TestScan_ExitedHolderKeepsItsIdentity(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "600")
	pid := startProcess(t, cmd, "sleep 600")
	driver := t.TempDir()
	writeFile(t, driver, "0/pids", pidLines(pid))
	s := New(Options{DriverPath: driver})
	t.Cleanup(func() { _ = s.Close() })
	first := s.Scan().Processes[0].Identity
	if first.FriendlyName != "sleep" {
		t.Fatalf("FriendlyName = %q, want sleep", first.FriendlyName)
	}

	// The process goes; the (fake) driver still lists its PID. No other
	// process can be shown to hold the PID, so the identity stays the one
	// read while it ran: the PID is not renamed after itself.
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	for range 2 {
		if id := s.Scan().Processes[0].Identity; id != first {
			t.Errorf("identity after exit %+v; want the one read while it ran %+v", id, first)
		}
	}

	// Unlisted on a complete scan: forgotten, descriptor closed.
	writeFile(t, driver, "0/pids", "")
	s.Scan()
	if len(s.cache) != 0 || s.held != 0 {
		t.Errorf("cache %v, held %d; want empty after a complete scan", s.cache, s.held)
	}
}
