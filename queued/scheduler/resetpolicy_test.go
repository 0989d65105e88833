package scheduler

import (
	"testing"

	"github.com/ttkit/ttkit/queued/store"
)

// On a shared daemon a reset may be kept from interrupting the running
// job (a non-admin's reset and another user's job): the reset waits at the
// head of the card, the job finishes as it would have, the reset runs
// next, and the answer names the job it waits for. The reset records who
// asked for it.
func TestScheduler_ResetWaitsForAJobItMayNotInterrupt(t *testing.T) {
	b := setup(t, func(o *Options) { o.Controls = Controls{Reset: "true #", HealthCheck: "true"} })
	gate, release := b.gate()
	alice, bob := uint32(1001), uint32(1002)
	running, err := b.s.Submit(JobSpec{Card: 0, Cmd: gate, Cwd: b.work, OwnerUID: &alice, Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	b.waitOutput(running.ID, "started")
	card := 0
	var asked *store.Job
	outs, err := b.s.Reset(ResetRequest{Card: &card, OwnerUID: &bob, Owner: "bob", MayInterrupt: func(j store.Job) bool {
		asked = &j
		return j.OwnerUID != nil && *j.OwnerUID == bob
	}})
	if err != nil {
		t.Fatal(err)
	}
	o := outs[0]
	if o.Interrupted != "" || o.WaitsFor != running.ID || o.WaitsForOwner != "alice" || asked == nil || asked.ID != running.ID {
		t.Fatalf("outcome %+v: want it to wait for %s of alice", o, running.ID)
	}
	reset, err := b.s.Job(o.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if reset.OwnerUID == nil || *reset.OwnerUID != bob || reset.Owner != "bob" {
		t.Errorf("reset owner %v %q, want bob", reset.OwnerUID, reset.Owner)
	}
	if w, _ := b.s.Watch(running.ID); w.Done {
		t.Fatal("the reset interrupted another user's job")
	}
	release()
	if done := b.waitDone(running.ID); done.Outcome != store.OutcomeSuccess {
		t.Errorf("alice's job ended %s, want success", done.Outcome)
	}
	if done := b.waitDone(o.JobID); done.Outcome != store.OutcomeSuccess {
		t.Errorf("the reset ended %s %s", done.Outcome, done.Error)
	}

	// The owner's own reset interrupts as before.
	gate, _ = b.gate()
	mine, _ := b.s.Submit(JobSpec{Card: 0, Cmd: gate, Cwd: b.work, OwnerUID: &bob, Owner: "bob"})
	b.waitOutput(mine.ID, "started")
	outs, err = b.s.Reset(ResetRequest{Card: &card, OwnerUID: &bob, MayInterrupt: func(j store.Job) bool { return *j.OwnerUID == bob }})
	if err != nil || outs[0].Interrupted != mine.ID || outs[0].WaitsFor != "" {
		t.Fatalf("own reset: %+v, %v", outs, err)
	}
	if done := b.waitDone(mine.ID); done.Outcome != store.OutcomeInterrupted {
		t.Errorf("own job ended %s, want interrupted", done.Outcome)
	}
}
