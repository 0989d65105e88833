package procscan

import (
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// withNoFile lowers the soft descriptor limit for the rest of the test.
// Tests using it must not run in parallel: the limit is the process's.
func withNoFile(t *testing.T, soft uint64) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = soft
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// Under a small descriptor limit, more holders than the limit are all
// named: the held-descriptor cap follows RLIMIT_NOFILE and the rest are
// verified by path, so no scan fails with "too many open files".
func TestScan_DescriptorCapFollowsTheLimit(t *testing.T) {
	const holders = 400
	h := newFakeHost(t)
	pids := make([]int, holders)
	for i := range pids {
		pids[i] = 10000 + i
		h.set(t, pids[i], "stat", fakeStat(pids[i], "w", uint64(i+1)))
		h.set(t, pids[i], "cmdline", "worker.py\x00"+strconv.Itoa(i)+"\x00")
	}
	h.list(t, pids...)
	open := countFDs(t)
	withNoFile(t, uint64(open+holders/2))
	// Generous: 400 first reads on a loaded CI host under -race.
	s := h.scanner(t, Options{ReadTimeout: time.Minute})
	for range 2 {
		res := s.Scan()
		if !res.Complete || len(res.Processes) != holders {
			t.Fatalf("complete %v, %d processes, errors %v; want all %d", res.Complete, len(res.Processes), res.Errors, holders)
		}
		for _, p := range res.Processes {
			if p.Identity.FriendlyName != "worker.py" {
				t.Fatalf("pid %d: %+v; want worker.py", p.PID, p.Identity)
			}
		}
	}
	if got := countFDs(t); got > open+holders/2-16 {
		t.Errorf("%d descriptors open under a limit of %d; want room left for the rest of the process", got, open+holders/2)
	}
	// A descriptor limit reached anyway (by the rest of the process) costs
	// held descriptors, not the scan.
	var hog []int
	t.Cleanup(func() {
		for _, fd := range hog {
			unix.Close(fd)
		}
	})
	for {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			break
		}
		hog = append(hog, fd)
	}
	unix.Close(hog[len(hog)-1])
	hog = hog[:len(hog)-1]
	h.list(t, append(pids, 20000)...)
	h.set(t, 20000, "stat", fakeStat(20000, "n", 9))
	h.set(t, 20000, "cmdline", "new.py\x00")
	if res := s.Scan(); !res.Complete || len(res.Processes) != holders+1 {
		t.Fatalf("at the limit: complete %v, %d processes, errors %v", res.Complete, len(res.Processes), res.Errors)
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}
