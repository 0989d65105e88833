package scheduler

import (
	"errors"
	"testing"

	"github.com/ttkit/ttkit/queued/store"
)

// reopen stops the scheduler, closes the store, reopens it with writes
// working again and starts a new scheduler: a real restart.
func (b *bundle) reopen() {
	b.t.Helper()
	b.s.Stop()
	if err := b.st.Close(); err != nil {
		b.t.Fatal(err)
	}
	b.open()
	b.start()
}

// TestScheduler_StopWhileWritesFailKeepsAnswers: a job that ended while
// the store failed was answered as done with its exit code; a stop before
// the store recovers, then a start with writes working, must not turn it
// into "interrupted".
func TestScheduler_StopWhileWritesFailKeepsAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	gate, open := b.gate()
	g := b.submit(0, gate)
	b.waitOutput(g.ID, "started")
	b.fs.set(always(errInjected))
	open()
	held := b.wait(g.ID, "done (held)", func(w Watch) bool { return w.Done }).Info
	if !held.Held || *held.ExitCode != 0 {
		t.Fatalf("job that ended while writes fail: %+v", held)
	}
	b.reopen()
	rec, err := b.st.Job(g.ID)
	if err != nil || rec.State != store.StateDone || rec.Outcome != store.OutcomeSuccess || *rec.ExitCode != 0 {
		t.Fatalf("after stop and restart: %+v, %v; want the answered success", rec, err)
	}
}

// TestScheduler_StopWhileWritesFailKeepsADeadCard: a card that failed its
// health check while writes failed stays dead after a stop and a restart,
// and the jobs failed with it are not run.
func TestScheduler_StopWhileWritesFailKeepsADeadCard(t *testing.T) {
	t.Parallel()
	ctl := newControls(t)
	b := setup(t, func(o *Options) { o.Controls = ctl.options() })
	ctl.flag("fail-health", true)
	ctl.flag("block-reset", true)
	card := 0
	res, err := b.s.Reset(ResetRequest{Card: &card})
	if err != nil {
		t.Fatal(err)
	}
	victim := b.submit(0, "echo ran >> runs")
	b.waitOutput(res[0].JobID, "reset waiting")
	b.fs.set(always(errInjected))
	ctl.flag("open-reset", true)
	b.wait(victim.ID, "failed with its dead card", func(w Watch) bool { return w.Done })
	b.reopen()
	st := b.s.Status()
	if st.Cards[0].State != Dead {
		t.Fatalf("card 0 after stop and restart: %s; it was answered dead", st.Cards[0].State)
	}
	rec, err := b.st.Job(victim.ID)
	if err != nil || rec.State != store.StateDone || rec.Outcome != store.OutcomeCardDead {
		t.Fatalf("job failed with the dead card, after restart: %+v, %v", rec, err)
	}
}

// TestScheduler_KillWhileWritesFailIsRefused: a kill of a queued job that
// cannot be recorded is refused, and the job keeps its place.
func TestScheduler_KillWhileWritesFailIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	gate, open := b.gate()
	g := b.submit(0, gate)
	b.waitOutput(g.ID, "started")
	q := b.submit(0, "echo q")
	b.fs.set(always(errInjected))
	if _, err := b.s.Kill(q.ID); !errors.Is(err, ErrPersistence) {
		t.Fatalf("kill of a queued job while writes fail: %v; want ErrPersistence", err)
	}
	if info, _ := b.s.Job(q.ID); info.State != store.StateQueued || info.Position != 1 {
		t.Fatalf("after the refused kill: %+v", info)
	}
	b.fs.set(nil)
	open()
	if got := b.waitDone(q.ID); *got.ExitCode != 0 {
		t.Fatalf("queued job after writes recovered: %+v", got)
	}
}
