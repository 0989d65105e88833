package kmdtest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// BusyHost starts processes real sleep processes and lists them in a driver
// tree of devices devices under dir, the shape benchmarks of a full host
// use: every process holds two devices with fds descriptors each, listed
// newest first and interleaved as the KMD writes them, so the pids files
// carry duplicates. It returns once every process has exec'd sleep.
func BusyHost(tb testing.TB, dir string, devices, processes, fds int) (*Tree, []int) {
	tb.Helper()
	pids := make([]int, processes)
	procs := make([]*Process, processes)
	for i := range pids {
		procs[i] = Start(tb, dir, nil, "sleep", "600")
		pids[i] = procs[i].PID()
	}
	for _, p := range procs {
		p.WaitCommandLine(tb, 10*time.Second)
	}
	holders := make([][]int, devices)
	for i, pid := range pids {
		for _, d := range []int{i % devices, (i + 7) % devices} {
			holders[d] = append(holders[d], pid)
		}
	}
	tree := NewTree(tb, filepath.Join(dir, "driver"))
	for d, hs := range holders {
		var lines []int
		for range fds {
			for j := len(hs) - 1; j >= 0; j-- {
				lines = append(lines, hs[j])
			}
		}
		tree.SetPids(d, lines...)
	}
	return tree, pids
}

// Floor is the least any scan of a driver tree could do: open and read
// every device's pids file, and stat every listed /proc/<pid> to know it is
// still there. Scan benchmarks report their cost as a ratio to it.
type Floor struct {
	files []string
	procs []string
	buf   []byte
}

// NewFloor prepares the floor's paths for a tree of devices devices
// listing pids.
func NewFloor(tree *Tree, devices int, pids []int) *Floor {
	f := &Floor{buf: make([]byte, 64<<10)}
	for d := range devices {
		f.files = append(f.files, tree.PidsPath(d))
	}
	for _, pid := range pids {
		f.procs = append(f.procs, filepath.Join("/proc", strconv.Itoa(pid)))
	}
	return f
}

// Run does the floor's reads once.
func (f *Floor) Run() error {
	for _, path := range f.files {
		file, err := os.Open(path)
		if err != nil {
			return err
		}
		_, err = io.ReadFull(file, f.buf)
		file.Close()
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("reading %s: %w", path, err)
		}
	}
	for _, path := range f.procs {
		if _, err := os.Stat(path); err != nil {
			return err
		}
	}
	return nil
}
