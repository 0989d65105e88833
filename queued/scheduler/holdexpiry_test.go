package scheduler

import (
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/store"
)

// A hold's expiry counts from when it is taken, so a hold still queued
// behind a job when it expires ends then, expired, without ever taking its
// card: it neither outlives its expiry in the queue nor is started, as
// active, after it.
func TestHold_ExpiresWhileQueued(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	gate, release := b.gate()
	defer release()
	busy := b.submit(0, gate)
	b.waitOutput(busy.ID, "started")
	h, err := b.s.Hold(HoldSpec{Cards: []int{0}, Expires: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	j := b.waitDone(h.ID)
	if j.Outcome != store.OutcomeExpired || !j.StartedAt.IsZero() {
		t.Errorf("a hold that expired queued: %s, started %v, %q", j.Outcome, j.StartedAt, j.Error)
	}
	if w, _ := b.s.Watch(busy.ID); w.Info.State != store.StateRunning {
		t.Errorf("the job ahead of it is %s, want still running", w.Info.State)
	}
	// The card goes on with what is queued behind the expired hold.
	after := b.submit(0, "echo after")
	release()
	if j := b.waitDone(after.ID); j.Outcome != store.OutcomeSuccess {
		t.Errorf("the job after the expired hold: %s %q", j.Outcome, j.Error)
	}
}

// A queued hold restored by a restart keeps its expiry: it ends when that
// passes, though it is still queued behind the active hold that took the
// card again at the restart.
func TestHold_ExpiresWhileQueuedAfterRestart(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	first, err := b.s.Hold(HoldSpec{Cards: []int{0}, Reason: "first"})
	if err != nil {
		t.Fatal(err)
	}
	b.wait(first.ID, "active", func(w Watch) bool { return w.Info.State == store.StateRunning })
	h, err := b.s.Hold(HoldSpec{Cards: []int{0}, Expires: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b.restart()
	j := b.waitDone(h.ID)
	if j.Outcome != store.OutcomeExpired || !j.StartedAt.IsZero() {
		t.Errorf("a hold restored queued: %s, started %v, %q", j.Outcome, j.StartedAt, j.Error)
	}
	if w, _ := b.s.Watch(first.ID); w.Info.State != store.StateRunning {
		t.Errorf("the hold ahead of it is %s, want still active", w.Info.State)
	}
}
