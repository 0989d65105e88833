package procscan

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/kmdtest"
)

// A cmdline that never answers does not stall the scan: the holder is
// reported with the PID fallback, marked pending, the others are named, and
// only one read of it is ever outstanding. Once the read finishes, a later
// scan names it.
func TestScan_StuckIdentityReadDoesNotStall(t *testing.T) {
	h := newFakeHost(t)
	h.set(t, 801, "stat", fakeStat(801, "python3", 1))
	release := kmdtest.Fifo(t, filepath.Join(h.proc, "801", "cmdline"))
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
	release := kmdtest.Fifo(t, filepath.Join(h.driver, "0", "pids"))
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
