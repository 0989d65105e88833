package kmdtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Heartbeats moves the tt_heartbeat files of some cards, as a live
// firmware does, until the test ends: queued's fitness gate holds the jobs
// of a card whose heartbeat stands still, so a test stalls one (Stall) to
// stand for a hung firmware.
//
// The files are written by a process of their own (a bash loop), not by
// a goroutine of the test: a firmware's counter moves whatever the reader
// is doing, and a goroutine of a test binary running a whole package's
// parallel tests under the race detector can wait longer than the gate's
// heartbeat gap (500 ms) for its turn, while the reader's own timer has
// already fired. The reader then saw a live card's heartbeat stand still
// (issue 41: a forced reset climbed to the deep reset in CI, and 100 busy
// goroutines made it happen every time). The kernel schedules a sleeping
// process of its own promptly, however busy the test's goroutines are.
type Heartbeats struct {
	tb     testing.TB
	ctl    string // the loop's control directory
	cmd    *exec.Cmd
	exited chan struct{}
}

// heartbeatLoop is the writer: its arguments are the control directory,
// the interval in seconds, the test's PID, then a card, its starting
// value and its file for each card. A value is written over the last in
// place, never truncated, so a read never sees the file empty (sysfs
// never shows it so); values only grow, so no digit of an older one is
// left behind. A card with a stall-N file in the control directory does
// not move, and none does while a pause file is there; the gen file
// grows by a byte at the end of each pass (an append, whose size no read
// can see torn), so a caller knows when a change has been seen. The loop sleeps in read -t on a FIFO nobody writes (no process
// started per pass), and ends when the control directory or the test is
// gone.
const heartbeatLoop = `set -u
ctl=$1 every=$2 parent=$3
shift 3
ns=() vs=() ps=()
while [ $# -gt 0 ]; do ns+=("$1"); vs+=("$2"); ps+=("$3"); shift 3; done
exec 3<>"$ctl/sleep"
while [ -d "$ctl" ] && kill -0 "$parent" 2>/dev/null; do
  if [ ! -e "$ctl/pause" ]; then
    for i in "${!ns[@]}"; do
      [ -e "$ctl/stall-${ns[i]}" ] && continue
      vs[i]=$(( vs[i] + 1 ))
      printf '%d\n' "${vs[i]}" 2>/dev/null 1<>"${ps[i]}"
    done
  fi
  printf . 2>/dev/null >>"$ctl/gen"
  read -r -t "$every" -u 3 _
done
`

// StartHeartbeats moves each card's file in files (card number → its
// tt_heartbeat path) every interval until the test ends, from the value
// the file holds now (or 1, written first).
func StartHeartbeats(tb testing.TB, every time.Duration, files map[int]string) *Heartbeats {
	tb.Helper()
	h := &Heartbeats{tb: tb, ctl: tb.TempDir(), exited: make(chan struct{})}
	if err := unix.Mkfifo(filepath.Join(h.ctl, "sleep"), 0o600); err != nil {
		tb.Fatalf("making the heartbeat loop's FIFO: %v", err)
	}
	if err := os.WriteFile(filepath.Join(h.ctl, "gen"), nil, 0o600); err != nil {
		tb.Fatal(err)
	}
	args := []string{"-c", heartbeatLoop, "heartbeat", h.ctl, fmt.Sprintf("%.3f", every.Seconds()), strconv.Itoa(os.Getpid())}
	for n, path := range files {
		v, ok := readCounter(path)
		if !ok {
			v = 1
			if err := os.WriteFile(path+".new", []byte("1\n"), 0o644); err != nil {
				tb.Fatalf("starting card %d's heartbeat: %v", n, err)
			}
			if err := os.Rename(path+".new", path); err != nil {
				tb.Fatalf("starting card %d's heartbeat: %v", n, err)
			}
		}
		args = append(args, strconv.Itoa(n), strconv.FormatUint(v, 10), path)
	}
	h.cmd = exec.Command("bash", args...)
	if err := h.cmd.Start(); err != nil {
		tb.Fatalf("starting the heartbeat loop: %v", err)
	}
	go func() { h.cmd.Wait(); close(h.exited) }()
	tb.Cleanup(func() {
		h.cmd.Process.Kill()
		<-h.exited
	})
	return h
}

// readCounter is the number a heartbeat file holds, if it holds one.
func readCounter(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	return v, err == nil
}

// Stall stops (true) or restarts card n's heartbeat; stopped, it stands
// at its last value. It returns once the loop has seen the change: no
// write of card n follows a Stall(n, true).
func (h *Heartbeats) Stall(n int, stop bool) {
	h.flag("stall-"+strconv.Itoa(n), stop)
}

// Pause runs fn while no heartbeat moves (a test removing a card's sysfs
// entry, which a write would bring back).
func (h *Heartbeats) Pause(fn func()) {
	h.flag("pause", true)
	defer h.flag("pause", false)
	fn()
}

// flag creates or removes one of the loop's control files and waits for
// a whole pass of the loop begun after it. It may be called from any
// goroutine: a failure is reported with Errorf.
func (h *Heartbeats) flag(name string, on bool) {
	path := filepath.Join(h.ctl, name)
	var err error
	if on {
		err = os.WriteFile(path, nil, 0o600)
	} else if err = os.Remove(path); os.IsNotExist(err) {
		err = nil
	}
	if err != nil {
		h.tb.Errorf("heartbeat control %s: %v", name, err)
		return
	}
	g0 := h.passes()
	deadline := time.Now().Add(30 * time.Second)
	for {
		// The pass under way may have read the flags before the change;
		// the one after it has not.
		if h.passes() >= g0+2 {
			return
		}
		select {
		case <-h.exited:
			h.tb.Errorf("heartbeat loop exited (%v) before it saw %s", h.cmd.ProcessState, name)
			return
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			h.tb.Errorf("heartbeat loop did not see %s within 30 s", name)
			return
		}
	}
}

// passes is how many passes the loop has finished.
func (h *Heartbeats) passes() int64 {
	fi, err := os.Stat(filepath.Join(h.ctl, "gen"))
	if err != nil {
		return 0
	}
	return fi.Size()
}
