package procscan

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fifo replaces path with a named pipe: reading it blocks until a writer
// comes, as a read of /proc/<pid>/cmdline does while the target is stuck in
// the kernel holding its mmap lock. release writes content and closes, which
// lets the blocked reader finish; it runs at cleanup too so nothing leaks.
func fifo(t *testing.T, path string) (release func(content string)) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(path)
	if err := unix.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	done := false
	release = func(content string) {
		if done {
			return
		}
		done = true
		// Blocks until the reader has opened its end; the reader is
		// already waiting in open (or will be), so this returns.
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Errorf("opening %s for writing: %v", path, err)
			return
		}
		_, _ = f.WriteString(content)
		_ = f.Close()
	}
	t.Cleanup(func() { release("") })
	return release
}

// A cmdline that never answers does not stall the scan: the holder is
// reported with the PID fallback, marked pending, the others are named, and
// only one read of it is ever outstanding. Once the read finishes, a later
// scan names it.
func TestScan_StuckIdentityReadDoesNotStall(t *testing.T) {
	h := newFakeHost(t)
	h.set(t, 801, "stat", fakeStat(801, "python3", 1))
	release := fifo(t, filepath.Join(h.proc, "801", "cmdline"))
	h.set(t, 802, "stat", fakeStat(802, "sleep", 2))
	h.set(t, 802, "cmdline", "sleep\x00600\x00")
	h.list(t, 801, 802)
	s := h.scanner(t, Options{ReadTimeout: 50 * time.Millisecond})

	for range 3 {
		begin := time.Now()
		ids := identities(t, s)
		if took := time.Since(begin); took > 5*time.Second {
			t.Fatalf("scan took %s", took)
		}
		if got := ids[801]; got.Source != SourcePID || !got.Pending || got.FriendlyName != "801" || !errors.Is(got.Err, ErrReadPending) {
			t.Errorf("stuck holder: %+v; want the pending PID fallback", got)
		}
		if got := ids[802]; got.FriendlyName != "sleep" {
			t.Errorf("other holder: %+v; want sleep", got)
		}
		if n := s.outstandingReads(); n != 1 {
			t.Errorf("%d reads outstanding; want 1 at most per PID", n)
		}
	}

	release("python3\x00late.py\x00")
	waitUntil(t, "the late identity", func() bool { return identities(t, s)[801].FriendlyName == "late.py" })
	if got := identities(t, s)[801]; got.Pending || got.Source != SourceCmdline || got.StartTime != 1 {
		t.Errorf("late identity %+v; want late.py from cmdline", got)
	}
}

// A pids file that never answers ends the scan at the context's deadline as
// an incomplete scan; the next scan waits for the same read rather than
// starting another, and gets its result once it finishes.
func TestScanContext_StuckPidsFileEndsAtDeadline(t *testing.T) {
	h := newFakeHost(t)
	release := fifo(t, filepath.Join(h.driver, "0", "pids"))
	s := h.scanner(t, Options{})

	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		res := s.ScanContext(ctx)
		cancel()
		if res.Complete || len(res.Errors) != 1 || !errors.Is(res.Errors[0], context.DeadlineExceeded) {
			t.Fatalf("stuck scan: %+v; want incomplete with the deadline error", res)
		}
		if !s.scanning() {
			t.Fatalf("the stuck scan is no longer outstanding")
		}
	}
	release(strconv.Itoa(os.Getpid()+100000) + "\n")
	var res Result
	waitUntil(t, "the stuck scan's result", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		res = s.ScanContext(ctx)
		return res.Complete
	})
	if len(res.Processes) != 1 {
		t.Errorf("released scan: %+v; want the one listed holder", res)
	}
}
