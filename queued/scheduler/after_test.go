package scheduler

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/store"
)

// submitAfter queues cmd on card after the jobs ids, in mode.
func (b *bundle) submitAfter(card int, cmd string, mode store.AfterMode, ids ...string) JobInfo {
	b.t.Helper()
	info, err := b.s.Submit(JobSpec{Card: card, Cmd: cmd, Cwd: b.work, After: ids, AfterMode: mode})
	if err != nil {
		b.t.Fatal(err)
	}
	return info
}

// The rule: a job waiting for a dependency keeps its FIFO place but does
// not block the jobs behind it; it starts at its turn once the
// dependency is met.
func TestAfter_WaitingJobDoesNotBlockTheJobsBehindIt(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	gate1, release1 := b.gate()
	dep := b.submit(1, gate1) // on the other card: card 0's queue is free
	b.waitOutput(dep.ID, "started")
	waiting := b.submitAfter(0, "echo after", store.AfterOK, dep.ID)
	behind := b.submit(0, "echo behind")
	if got := b.waitDone(behind.ID); got.Outcome != store.OutcomeSuccess {
		t.Fatalf("the job behind the waiting one: %s %q", got.Outcome, got.Error)
	}
	info, err := b.s.Job(waiting.ID)
	if err != nil {
		t.Fatal(err)
	}
	if info.State != store.StateQueued || len(info.WaitsFor) != 1 || info.WaitsFor[0] != dep.ID {
		t.Fatalf("the waiting job: state %s, waits for %v; want queued, waiting for %s", info.State, info.WaitsFor, dep.ID)
	}
	release1()
	if got := b.waitDone(waiting.ID); got.Outcome != store.OutcomeSuccess || !strings.Contains(output(t, b, waiting.ID), "after") {
		t.Fatalf("the dependent job once its dependency succeeded: %s %q", got.Outcome, got.Error)
	}
}

// afterok of a job that fails ends the dependent job at once, outcome
// dependency, without running, its message naming the job; notok runs.
func TestAfter_UnmeetableDependencyEndsTheJob(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	gate, release := b.gate()
	dep := b.submit(1, gate+"; exit 3")
	ok := b.submitAfter(0, "echo ran > ran-ok", store.AfterOK, dep.ID)
	notok := b.submitAfter(0, "echo notok", store.AfterNotOK, dep.ID)
	anyJob := b.submitAfter(0, "echo any", store.AfterAny, dep.ID)
	chained := b.submitAfter(0, "echo chained", store.AfterOK, ok.ID)
	release()
	got := b.waitDone(ok.ID)
	if got.Outcome != store.OutcomeDependency || !strings.Contains(got.Error, dep.ID) || got.Iterations != 0 {
		t.Fatalf("afterok of a failed job: %s %q, %d iterations; want dependency naming %s, never run", got.Outcome, got.Error, got.Iterations, dep.ID)
	}
	if got := b.waitDone(chained.ID); got.Outcome != store.OutcomeDependency || !strings.Contains(got.Error, ok.ID) {
		t.Fatalf("afterok of a job that ended dependency: %s %q", got.Outcome, got.Error)
	}
	for _, id := range []string{notok.ID, anyJob.ID} {
		if got := b.waitDone(id); got.Outcome != store.OutcomeSuccess {
			t.Fatalf("job %s after a failed job: %s %q; want it run", id[:8], got.Outcome, got.Error)
		}
	}
	// Already ended: judged at submission.
	late := b.submitAfter(1, "echo late", store.AfterOK, dep.ID)
	if got := b.waitDone(late.ID); got.Outcome != store.OutcomeDependency {
		t.Fatalf("afterok of a job already failed: %s %q", got.Outcome, got.Error)
	}
}

// A job's dependency survives a restart of queued: the restart
// interrupts the running job a queued job waits for (afterok), which so
// ends dependency, and so does the job queued after that one.
func TestAfter_SurvivesRestart(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	gate, release := b.gate()
	t.Cleanup(release)
	running := b.submit(1, gate)
	b.waitOutput(running.ID, "started")
	dep := b.submitAfter(1, "echo dep", store.AfterOK, running.ID)
	waiting := b.submitAfter(0, "echo after", store.AfterOK, dep.ID)
	b.restart()
	if got := b.waitDone(dep.ID); got.Outcome != store.OutcomeDependency || !strings.Contains(got.Error, running.ID) {
		t.Fatalf("after a restart, afterok of an interrupted job: %s %q", got.Outcome, got.Error)
	}
	got := b.waitDone(waiting.ID)
	if got.Outcome != store.OutcomeDependency || !strings.Contains(got.Error, dep.ID) || got.AfterMode != store.AfterOK {
		t.Fatalf("after a restart, afterok of a job that ended dependency: %s %q (%s)", got.Outcome, got.Error, got.AfterMode)
	}
}

// A job retried after its card ended an attempt (docs/job-endings.md)
// counts as ended only at its last attempt: afterok of a job that hangs
// once and then succeeds runs, and never ends dependency on the hung
// attempt.
func TestAfter_RetriedJobCountsAtItsLastAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	counter := filepath.Join(b.work, "count")
	cmd := fmt.Sprintf(`n=$(cat %[1]q 2>/dev/null || echo 0); n=$((n+1)); echo $n > %[1]q; echo run $n; if [ $n -lt 2 ]; then sleep 1000; fi`, counter)
	dep, err := b.s.Submit(JobSpec{Card: 1, Cmd: cmd, Cwd: b.work, IdleTimeout: time.Second, Retries: 1})
	if err != nil {
		t.Fatal(err)
	}
	waiting := b.submitAfter(0, "echo after", store.AfterOK, dep.ID)
	if got := b.waitDone(waiting.ID); got.Outcome != store.OutcomeSuccess {
		t.Fatalf("afterok of a job that hung once, then succeeded on its retry: %s %q", got.Outcome, got.Error)
	}
	if got := b.waitDone(dep.ID); got.Attempt != 2 || got.Outcome != store.OutcomeSuccess {
		t.Fatalf("the dependency: attempt %d, %s", got.Attempt, got.Outcome)
	}
}

// The fitness gate does not hold a job waiting for a dependency: on an
// unfit card whose queue holds only such a job, the worker reads waiting
// for it, not paused by the gate.
func TestAfter_WaitingJobIsNotHeldByTheGate(t *testing.T) {
	t.Parallel()
	cards := newFakeCards(t, 0, 1)
	b := setup(t, func(o *Options) { cards.options(o) })
	cards.beat(0, false)
	waitCard(b, 0, "unfit", func(c CardStatus) bool { return c.State == Unfit })
	gate, release := b.gate()
	t.Cleanup(release)
	dep := b.submit(1, gate)
	b.waitOutput(dep.ID, "started")
	b.submitAfter(0, "true", store.AfterOK, dep.ID)
	c := waitCard(b, 0, "waiting for the dependency", func(c CardStatus) bool { return c.Worker != "idle" })
	if !strings.Contains(c.Worker, "waits for a job it was queued after") {
		t.Fatalf("card 0's worker: %q; want it waiting for the dependency, not held by the gate", c.Worker)
	}
}
