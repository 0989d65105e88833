package procscan

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ttkit/ttkit/internal/kmdtest"
)

const (
	benchDevices   = 32
	benchProcesses = 64
	benchFDs       = 3 // descriptors (lines) per process per device
)

// benchHost is a full host: benchProcesses real processes holding two of
// benchDevices devices each, benchFDs descriptors per device.
func benchHost(b *testing.B) (*kmdtest.Tree, []int) {
	b.Helper()
	return kmdtest.BusyHost(b, b.TempDir(), benchDevices, benchProcesses, benchFDs)
}

// BenchmarkScanSteadyState scans the same holders over and over: nothing is
// new, so every cycle lists the driver directory, reads the pids files and
// checks each cached process's start time.
func BenchmarkScanSteadyState(b *testing.B) {
	tree, _ := benchHost(b)
	s := New(Options{DriverPath: tree.Dir})
	b.Cleanup(func() { _ = s.Close() })
	if res := s.Scan(); len(res.Processes) != benchProcesses || !res.Complete {
		b.Fatalf("warm-up scan: %d processes, complete %v", len(res.Processes), res.Complete)
	}
	b.ReportAllocs()
	for b.Loop() {
		if res := s.Scan(); len(res.Processes) != benchProcesses {
			b.Fatalf("%d processes", len(res.Processes))
		}
	}
}

// BenchmarkFloor is the least any scan could do: open and read every pids
// file, and stat every /proc/<pid> to know it is still there.
func BenchmarkFloor(b *testing.B) {
	tree, pids := benchHost(b)
	floor := kmdtest.NewFloor(tree, benchDevices, pids)
	b.ReportAllocs()
	for b.Loop() {
		if err := floor.Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStartTimeCheck compares the two ways to re-check the start time
// of 64 cached processes: pread on a /proc/<pid>/stat descriptor kept open
// (what Scanner does), or open, read and close by path every time.
func BenchmarkStartTimeCheck(b *testing.B) {
	_, pids := benchHost(b)
	s := New(Options{})
	b.Run("pread-held", func(b *testing.B) {
		fds := make([]int, len(pids))
		for i, pid := range pids {
			fd, err := open(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				b.Fatal(err)
			}
			fds[i] = fd
			defer unix.Close(fd)
		}
		b.ReportAllocs()
		for b.Loop() {
			for _, fd := range fds {
				if _, err := s.rd.preadStart(fd); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("open-read-close", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, pid := range pids {
				if _, err := s.rd.readStart(pid); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkNewHolder measures what a newly seen holder costs to read: its
// identity alone (stat, cmdline), and with every attribution read on
// (owner and user name, environ, cgroup). The difference is the price of
// attribution per new holder; a holder already known costs nothing more.
func BenchmarkNewHolder(b *testing.B) {
	cmd := exec.Command("sleep", "300")
	cmd.Env = append(os.Environ(), JobEnvVar+"=0123456789abcdef0123456789abcdef")
	pid := startProcess(b, cmd, "sleep 300")
	dir := "/proc/" + strconv.Itoa(pid)
	for _, bc := range []struct {
		name string
		attr AttributionOptions
	}{
		{"identity", AttributionOptions{}},
		{"attributed", AttributionOptions{User: true, QueuedJob: true, Cgroup: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := reader{procPath: "/proc", attr: bc.attr}
			b.ReportAllocs()
			for b.Loop() {
				id := r.readIdentity(pid, dir)
				if bc.attr.Any() {
					id.Attribution = r.readAttribution(dir, bc.attr)
					if id.Attribution.QueuedJob == "" {
						b.Fatal("no job marker read")
					}
				}
				if id.Source != SourceCmdline {
					b.Fatalf("identity %+v", id)
				}
			}
		})
	}
}
