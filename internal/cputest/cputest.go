// Package cputest gives tests of queued's CPU affinity (package cpupin)
// the CPUs the test may use, and skips a test that needs two where it
// has one: keeping queued to one CPU of one changes nothing.
package cputest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Ours is the set of CPUs this process may use.
func Ours(t testing.TB) unix.CPUSet {
	t.Helper()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatalf("reading this process's CPUs: %v", err)
	}
	return set
}

// NeedTwo is Ours, skipping the test where that is a single CPU.
func NeedTwo(t testing.TB) unix.CPUSet {
	t.Helper()
	set := Ours(t)
	if set.Count() < 2 {
		t.Skipf("this test may use only CPU %d: a process kept to one CPU of one is not kept", First(set))
	}
	return set
}

// First is the lowest CPU of set, or -1 for none.
func First(set unix.CPUSet) int {
	for cpu := range len(set) * 64 {
		if set.IsSet(cpu) {
			return cpu
		}
	}
	return -1
}

// Last is the highest CPU of set, or -1 for none.
func Last(set unix.CPUSet) int {
	for cpu := len(set)*64 - 1; cpu >= 0; cpu-- {
		if set.IsSet(cpu) {
			return cpu
		}
	}
	return -1
}

// Allowed is the Cpus_allowed_list of the process or thread whose /proc
// directory is dir ("0-1", "3"): a function of its own, not a test's
// helper, for the processes tests start to report with.
func Allowed(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%s/status has no Cpus_allowed_list", dir)
}
