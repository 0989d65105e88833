package kmdtest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// BusyHost starts processes real sleep processes and lists them in a driver
// tree of devices devices under dir, the shape benchmarks of a full host
// use: every process holds two devices with two descriptors each, so the
// pids files carry duplicates as the KMD writes them.
func BusyHost(tb testing.TB, dir string, devices, processes int) (*Tree, []int) {
	tb.Helper()
	pids := make([]int, processes)
	for i := range pids {
		cmd := exec.Command("sleep", "600")
		if err := cmd.Start(); err != nil {
			tb.Fatalf("starting sleep: %v", err)
		}
		tb.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		pids[i] = cmd.Process.Pid
	}
	lists := make([][]int, devices)
	for i, pid := range pids {
		for _, d := range []int{i % devices, (i + 1) % devices} {
			lists[d] = append(lists[d], pid, pid)
		}
	}
	tree := NewTree(tb, dir)
	for d, l := range lists {
		tree.SetPids(d, l...)
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
