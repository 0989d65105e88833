package procscan

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

const (
	benchDevices   = 32
	benchProcesses = 64
	benchFDs       = 3 // descriptors (lines) per process per device
)

// benchHost starts benchProcesses real sleep processes and a fake driver
// tree in which each of them holds two devices with benchFDs descriptors
// each, listed newest first and interleaved as the driver would. It returns
// the driver path and the PIDs.
func benchHost(b *testing.B) (string, []int) {
	b.Helper()
	pids := make([]int, benchProcesses)
	for i := range pids {
		cmd := exec.Command("sleep", "600")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		pids[i] = cmd.Process.Pid
	}
	for _, pid := range pids {
		waitUntil(b, "sleep to exec", func() bool {
			cl, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			return err == nil && string(cl) == "sleep\x00600\x00"
		})
	}
	driver := b.TempDir()
	holders := make([][]int, benchDevices)
	for i, pid := range pids {
		for _, d := range []int{i % benchDevices, (i + 7) % benchDevices} {
			holders[d] = append(holders[d], pid)
		}
	}
	for d, hs := range holders {
		var lines []int
		for range benchFDs {
			for j := len(hs) - 1; j >= 0; j-- {
				lines = append(lines, hs[j])
			}
		}
		writeFile(b, driver, strconv.Itoa(d)+"/pids", pidLines(lines...))
	}
	return driver, pids
}

// BenchmarkScanSteadyState scans the same holders over and over: nothing is
// new, so every cycle lists the driver directory, reads the pids files and
// checks each cached process's start time.
func BenchmarkScanSteadyState(b *testing.B) {
	driver, _ := benchHost(b)
	s := New(Options{DriverPath: driver})
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
	driver, pids := benchHost(b)
	var files, procs []string
	for d := range benchDevices {
		files = append(files, driver+"/"+strconv.Itoa(d)+"/pids")
	}
	for _, pid := range pids {
		procs = append(procs, "/proc/"+strconv.Itoa(pid))
	}
	buf := make([]byte, 64<<10)
	b.ReportAllocs()
	for b.Loop() {
		for _, path := range files {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(f, buf); err != io.ErrUnexpectedEOF {
				b.Fatal(err)
			}
			f.Close()
		}
		for _, path := range procs {
			if _, err := os.Stat(path); err != nil {
				b.Fatal(err)
			}
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
				if _, err := s.preadStart(fd); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("open-read-close", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, pid := range pids {
				if _, err := s.readStart(pid); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
