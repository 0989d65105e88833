package scheduler

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/store"
)

// recordsJob is a job command that appends "job" to the probe's record
// when it runs, so the order of probes and jobs reads from one file.
func recordsJob(dir string) string {
	return fmt.Sprintf("echo job >> %q/probed", dir)
}

// probedBeforeNext reports whether card 0 was probed after the job that
// ended badly and before the next one ran: the record ends "0 job".
func probedBeforeNext(got []string) bool {
	n := len(got)
	return n >= 2 && got[n-1] == "job" && got[n-2] == "0"
}

// H1 (docs/job-endings.md): a job silent past its idle timeout ends hung
// (-124), stopped by the kill ladder, and its card passes the gate with
// the site probe before its next job.
func TestJobEnd_SilentJobIsHungAndItsCardIsProbed(t *testing.T) {
	t.Parallel()
	cards := newFakeCards(t, 0, 1)
	probe, dir := probeScript(t)
	b := setup(t, func(o *Options) { cards.options(o); o.GateCmd = probe })
	poll(t, "the start probes", func() bool { return len(probed(dir)) >= 2 })
	info, err := b.s.Submit(JobSpec{Card: 0, Cmd: "echo started; sleep 1000", Cwd: b.work, IdleTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	got := b.waitDone(info.ID)
	if got.Outcome != store.OutcomeHung || got.ExitCode == nil || *got.ExitCode != HungExitCode || got.KillRung != "SIGINT" {
		t.Fatalf("want hung (%d) by SIGINT, got %s %v %q %q", HungExitCode, got.Outcome, got.ExitCode, got.KillRung, got.Error)
	}
	if got.IdleTimeout != 1 || !strings.Contains(got.Error, "no output for 1s") {
		t.Fatalf("idle timeout %d, error %q", got.IdleTimeout, got.Error)
	}
	b.waitDone(b.submit(0, recordsJob(dir)).ID)
	if p := probed(dir); !probedBeforeNext(p) {
		t.Fatalf("probes and jobs: %v; want card 0 probed after the hung job, before the next", p)
	}
}

// K3: a job that ignores SIGINT and SIGTERM is SIGKILLed, says so in its
// record, and its card passes the gate with the site probe before its
// next job.
func TestJobEnd_SIGKILLedJobGatesItsCard(t *testing.T) {
	t.Parallel()
	cards := newFakeCards(t, 0, 1)
	probe, dir := probeScript(t)
	b := setup(t, func(o *Options) {
		cards.options(o)
		o.GateCmd, o.KillGrace, o.TermGrace = probe, 200*time.Millisecond, 200*time.Millisecond
	})
	poll(t, "the start probes", func() bool { return len(probed(dir)) >= 2 })
	info := b.submit(0, "trap '' INT TERM; echo started; sleep 1000")
	b.waitOutput(info.ID, "started")
	if _, err := b.s.Kill(info.ID); err != nil {
		t.Fatal(err)
	}
	got := b.waitDone(info.ID)
	if got.Outcome != store.OutcomeKilled || got.KillRung != "SIGKILL" {
		t.Fatalf("want killed by SIGKILL, got %s %q %q", got.Outcome, got.KillRung, got.Error)
	}
	b.waitDone(b.submit(0, recordsJob(dir)).ID)
	if p := probed(dir); !probedBeforeNext(p) {
		t.Fatalf("probes and jobs: %v; want card 0 probed after the SIGKILLed job, before the next", p)
	}
}

// R1 and R2: a job that hangs twice with two retries is run again at the
// head of its card's queue each time, and its third attempt succeeds;
// every attempt is in its record and its output.
func TestJobEnd_HungTwiceThenSucceeds(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	counter := filepath.Join(b.work, "count")
	cmd := fmt.Sprintf(`n=$(cat %[1]q 2>/dev/null || echo 0); n=$((n+1)); echo $n > %[1]q; echo run $n; if [ $n -lt 3 ]; then sleep 1000; fi`, counter)
	info, err := b.s.Submit(JobSpec{Card: 0, Cmd: cmd, Cwd: b.work, IdleTimeout: time.Second, Retries: 2})
	if err != nil {
		t.Fatal(err)
	}
	got := b.waitDone(info.ID)
	if got.Outcome != store.OutcomeSuccess || got.Attempt != 3 || got.Retries != 2 || len(got.Attempts) != 2 {
		t.Fatalf("want success on attempt 3 of 3 after two, got %s attempt %d retries %d attempts %+v", got.Outcome, got.Attempt, got.Retries, got.Attempts)
	}
	for i, a := range got.Attempts {
		if a.Attempt != i+1 || a.Outcome != store.OutcomeHung || a.ExitCode != HungExitCode || a.StartedAt.IsZero() {
			t.Fatalf("attempt %d: %+v", i+1, a)
		}
	}
	out := output(t, b, info.ID)
	for _, want := range []string{"attempt 1/3", "run 1", "attempt 2/3", "run 2", "attempt 3/3", "run 3"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "attempt 2/3") > strings.Index(out, "run 3") {
		t.Fatalf("attempts out of order:\n%s", out)
	}
}

// R3: a job that fails by its own exit status on a fit card is not
// retried, whatever its retries.
func TestJobEnd_OwnFailureIsNotRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	counter := filepath.Join(b.work, "count")
	info, err := b.s.Submit(JobSpec{Card: 0, Cmd: fmt.Sprintf("echo x >> %q; exit 3", counter), Cwd: b.work, Retries: 3})
	if err != nil {
		t.Fatal(err)
	}
	got := b.waitDone(info.ID)
	if got.Outcome != store.OutcomeFailure || got.Attempt != 1 || len(got.Attempts) != 0 {
		t.Fatalf("want one failed attempt, got %s attempt %d %+v", got.Outcome, got.Attempt, got.Attempts)
	}
	if b, _ := os.ReadFile(counter); string(b) != "x\n" {
		t.Fatalf("ran %q; want once", b)
	}
}

// R4: a job interrupted by a reset of its card is run again once the
// reset is done.
func TestJobEnd_InterruptedByResetIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.Controls = Controls{Reset: "true", HealthCheck: "true"} })
	counter := filepath.Join(b.work, "count")
	cmd := fmt.Sprintf(`n=$(cat %[1]q 2>/dev/null || echo 0); n=$((n+1)); echo $n > %[1]q; echo run $n; if [ $n -lt 2 ]; then sleep 1000; fi`, counter)
	info, err := b.s.Submit(JobSpec{Card: 0, Cmd: cmd, Cwd: b.work, Retries: 1})
	if err != nil {
		t.Fatal(err)
	}
	b.waitOutput(info.ID, "run 1")
	if _, err := b.s.Reset(ResetRequest{Card: new(0)}); err != nil {
		t.Fatal(err)
	}
	got := b.waitDone(info.ID)
	if got.Outcome != store.OutcomeSuccess || got.Attempt != 2 || len(got.Attempts) != 1 || got.Attempts[0].Outcome != store.OutcomeInterrupted {
		t.Fatalf("want success on attempt 2 after an interrupted one, got %s attempt %d %+v", got.Outcome, got.Attempt, got.Attempts)
	}
}

// R5: retries and the idle timeout are bounded; a refusal names the value.
func TestJobEnd_LimitsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	_, err := b.s.Submit(JobSpec{Card: 0, Cmd: "true", Cwd: b.work, Retries: 11})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(fmt.Sprint(err), "11") {
		t.Fatalf("retries 11: %v", err)
	}
	_, err = b.s.Submit(JobSpec{Card: 0, Cmd: "true", Cwd: b.work, IdleTimeout: -time.Second})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(fmt.Sprint(err), "-1") {
		t.Fatalf("idle timeout -1: %v", err)
	}
}

// R4: a job with retries that a stop of queued interrupts is not run
// again: the never-replay rule stands.
func TestJobEnd_ServiceStopIsNotRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	info, err := b.s.Submit(JobSpec{Card: 0, Cmd: "echo started; sleep 1000", Cwd: b.work, Retries: 3})
	if err != nil {
		t.Fatal(err)
	}
	b.waitOutput(info.ID, "started")
	b.restart()
	got := b.waitDone(info.ID)
	if got.Outcome != store.OutcomeInterrupted || got.Attempt != 1 || len(got.Attempts) != 0 {
		t.Fatalf("want interrupted once and not run again, got %s attempt %d %+v", got.Outcome, got.Attempt, got.Attempts)
	}
}

// R6: a job that fails by its own exit status while its card turned unfit
// (the gate after it fails) ended because of its card: it waits at the
// head of the queue for the card to be fit, then runs again.
func TestJobEnd_FailedGateAfterTheJobRetriesIt(t *testing.T) {
	t.Parallel()
	cards := newFakeCards(t, 0, 1)
	b := setup(t, cards.options)
	counter, release := filepath.Join(b.work, "count"), filepath.Join(b.work, "release")
	cmd := fmt.Sprintf(`n=$(cat %[1]q 2>/dev/null || echo 0); n=$((n+1)); echo $n > %[1]q; echo run $n; `+
		`if [ $n -lt 2 ]; then while [ ! -e %[2]q ]; do sleep 0.01; done; exit 3; fi`, counter, release)
	info, err := b.s.Submit(JobSpec{Card: 0, Cmd: cmd, Cwd: b.work, Retries: 1})
	if err != nil {
		t.Fatal(err)
	}
	b.waitOutput(info.ID, "run 1")
	cards.beat(0, false)
	waitCard(b, 0, "unfit while its job runs", func(c CardStatus) bool { return c.State == Unfit })
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	b.wait(info.ID, "queued again for its second attempt", func(w Watch) bool {
		return w.Info.State == store.StateQueued && w.Info.Attempt == 2
	})
	cards.beat(0, true)
	got := b.waitDone(info.ID)
	if got.Outcome != store.OutcomeSuccess || got.Attempt != 2 || len(got.Attempts) != 1 || got.Attempts[0].ExitCode != 3 {
		t.Fatalf("want success on attempt 2 after a failure on an unfit card, got %s attempt %d %+v", got.Outcome, got.Attempt, got.Attempts)
	}
}
