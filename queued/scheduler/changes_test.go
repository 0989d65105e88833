package scheduler

import (
	"testing"
	"time"
)

// closesWithin fails the test unless ch closes within d.
func closesWithin(t *testing.T, what string, ch <-chan struct{}, d time.Duration) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("no change notification within %s after %s", d, what)
	}
}

// TestChanges_EveryTransitionNotifies checks that Changes wakes a
// watcher when a job is queued, starts, finishes and is killed, so the
// status page needs no polling to follow the queue.
func TestChanges_EveryTransitionNotifies(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	gen0, ch := b.s.Changes()
	select {
	case <-ch:
		t.Fatal("the change channel is closed before any change")
	default:
	}

	gate, release := b.gate()
	g := b.submit(0, gate)
	closesWithin(t, "a submission", ch, 30*time.Second)
	b.waitOutput(g.ID, "started")

	gen1, ch := b.s.Changes()
	if gen1 <= gen0 {
		t.Fatalf("generation %d after changes, was %d", gen1, gen0)
	}
	q := b.submit(0, "true")
	closesWithin(t, "queueing behind a running job", ch, 30*time.Second)

	_, ch = b.s.Changes()
	if _, err := b.s.Kill(q.ID); err != nil {
		t.Fatal(err)
	}
	closesWithin(t, "killing a queued job", ch, 30*time.Second)

	_, ch = b.s.Changes()
	release()
	closesWithin(t, "a job finishing", ch, 30*time.Second)
	b.waitDone(g.ID)
}

// TestChanges_PersistenceFailureNotifies checks that the store starting
// to refuse writes wakes a watcher: the page shows "store failing".
func TestChanges_PersistenceFailureNotifies(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.fs.set(always(errInjected))
	_, ch := b.s.Changes()
	if _, err := b.s.Submit(JobSpec{Card: 0, Cmd: "true", Cwd: b.work}); err == nil {
		t.Fatal("a submission succeeded while writes fail")
	}
	closesWithin(t, "a failed write", ch, 30*time.Second)
	if st := b.s.Status(); st.Persistence.OK {
		t.Fatal("status says the store is fine")
	}
}
