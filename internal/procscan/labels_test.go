package procscan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Smaller label cases against the spec (issue 21.6).
func TestScan_LabelEdgeCases(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	// 901: a command line whose first 64 KiB are all dropped as
	// non-printable: the sanitized line still has a name after them.
	long := strings.Repeat("\x01", 70<<10) + "\x00python3\x00late.py\x00"
	h.set(t, 901, "stat", fakeStat(901, "python3", 1))
	h.set(t, 901, "cmdline", long)
	// 902: a comm of only non-printable bytes was read: <unknown>, not the PID.
	h.set(t, 902, "stat", fakeStat(902, "x", 2))
	h.set(t, 902, "cmdline", "")
	h.set(t, 902, "comm", "\x01\x02\n")
	// 903: an empty argv[0]: no leading space in command_line.
	h.set(t, 903, "stat", fakeStat(903, "x", 3))
	h.set(t, 903, "cmdline", "\x00worker\x00--n\x002\x00")
	// 904: a non-printable argv[0].
	h.set(t, 904, "stat", fakeStat(904, "x", 4))
	h.set(t, 904, "cmdline", "\x7f\x00job.py\x00")
	h.list(t, 901, 902, 903, 904)
	ids := identities(t, h.scanner(t, Options{}))
	for pid, want := range map[int][2]string{
		901: {"late.py", "python3 late.py"},
		902: {Unknown, Unknown},
		903: {"worker", "worker --n 2"},
		904: {"job.py", "job.py"},
	} {
		if got := ids[pid]; got.FriendlyName != want[0] || got.CommandLine != want[1] {
			t.Errorf("pid %d: %+v; want %q, %q", pid, got, want[0], want[1])
		}
	}
}

// A device directory that is a symlink to a directory is a device.
func TestScan_SymlinkedDeviceDirectory(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	real := t.TempDir()
	writeFile(t, real, "pids", pidLines(0))
	if err := os.Symlink(real, filepath.Join(h.driver, "3")); err != nil {
		t.Fatal(err)
	}
	res := New(Options{DriverPath: h.driver, ProcPath: h.proc}).Scan()
	if len(res.Devices) != 1 || res.Devices[0].Number != 3 || !res.Devices[0].Foreign {
		t.Errorf("devices %+v; want device 3 through its symlink", res.Devices)
	}
}
