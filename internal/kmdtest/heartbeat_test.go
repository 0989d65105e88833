package kmdtest

import (
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// busy keeps every processor of the test busy with goroutines that never
// block, as a package's parallel tests under the race detector can, until
// the test ends.
func busy(t *testing.T) {
	var stop atomic.Bool
	for range 50 * runtime.GOMAXPROCS(0) {
		go func() {
			for x := 0; !stop.Load(); x++ {
			}
		}()
	}
	t.Cleanup(func() { stop.Store(true) })
}

// A heartbeat moves at its pace however busy the test's goroutines are:
// the gate's reader, whose timer fires on time, must not find a live
// card's heartbeat standing still because the test starved its writer.
// With the writer a goroutine of the test, 1 to 13 beats of some 200
// came through here.
func TestHeartbeats_MoveWhileTheTestIsBusy(t *testing.T) {
	s := CopySysfs(t, "n300")
	const every = 10 * time.Millisecond
	s.Beat(every, 0)
	file := filepath.Join(s.CardDir(0), "tt_heartbeat")
	// Once it has moved: the writer runs.
	first := waitMoved(t, file)
	busy(t)
	t0 := time.Now()
	deadline := t0.Add(3 * time.Second)
	var v uint64
	for time.Now().Before(deadline) {
		v, _ = readCounter(file)
		if time.Since(t0) >= time.Second {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	elapsed := time.Since(t0)
	want := uint64(elapsed/every) / 4
	if v < first+want {
		t.Fatalf("the heartbeat went from %d to %d in %v of busy goroutines, want at least %d beats (a quarter of its pace)", first, v, elapsed.Round(time.Millisecond), want)
	}
}

// waitMoved waits for file's counter to change and returns the new value.
func waitMoved(t *testing.T, file string) uint64 {
	t.Helper()
	a, _ := readCounter(file)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if b, ok := readCounter(file); ok && b != a {
			return b
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("%s never moved from %d", file, a)
	return 0
}

// Stall returns once the writer has seen it: nothing moves afterwards
// until the card beats again; Pause holds every card while its function
// runs.
func TestHeartbeats_StallAndPauseHoldOnReturn(t *testing.T) {
	t.Parallel()
	s := CopySysfs(t, "n300")
	h := s.Beat(5*time.Millisecond, 0)
	file := filepath.Join(s.CardDir(0), "tt_heartbeat")
	moved := func(within time.Duration) bool {
		a, _ := readCounter(file)
		deadline := time.Now().Add(within)
		for time.Now().Before(deadline) {
			if b, _ := readCounter(file); b != a {
				return true
			}
			time.Sleep(5 * time.Millisecond)
		}
		return false
	}
	if !moved(5 * time.Second) {
		t.Fatal("the heartbeat never moved")
	}
	h.Stall(0, true)
	if moved(200 * time.Millisecond) {
		t.Fatal("the heartbeat moved after Stall(0, true) returned")
	}
	h.Stall(0, false)
	if !moved(5 * time.Second) {
		t.Fatal("the heartbeat did not move again after Stall(0, false)")
	}
	h.Pause(func() {
		if moved(200 * time.Millisecond) {
			t.Error("the heartbeat moved during Pause")
		}
	})
	if !moved(5 * time.Second) {
		t.Fatal("the heartbeat did not move again after Pause")
	}
}
