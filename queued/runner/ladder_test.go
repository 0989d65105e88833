package runner

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// trapScript is a job that records each SIGINT and SIGTERM it gets in
// file (one name a line) and, with ignore, goes on; otherwise it exits on
// SIGTERM by the signal.
func trapScript(file string, ignore bool) string {
	term := "echo TERM >>" + file
	if !ignore {
		term += "; trap - TERM; kill -TERM $$"
	}
	return "trap 'echo INT >>" + file + "' INT; trap '" + term + "' TERM; echo ready; " +
		"while :; do sleep 0.05; done"
}

// TestRun_KillLadder (docs/job-endings.md, K1 and K2): a stop sends
// SIGINT, then after KillGrace SIGTERM, then after TermGrace SIGKILL, in
// that order, and says which signal ended the job.
func TestRun_KillLadder(t *testing.T) {
	t.Parallel()
	t.Run("ignores INT and TERM: SIGKILL", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 1<<20)
		rec := filepath.Join(b.dir, "signals")
		spec := b.spec(trapScript(rec, true))
		spec.KillGrace, spec.TermGrace = 300*time.Millisecond, 300*time.Millisecond
		stop := make(chan struct{})
		done := make(chan Result)
		go func() { done <- Run(spec, b.log, stop) }()
		b.waitOutput(t, "ready")
		close(stop)
		res := <-done
		if res.ExitCode != -9 || !res.Stopped || res.KillSignal != syscall.SIGKILL {
			t.Fatalf("%+v", res)
		}
		got, _ := os.ReadFile(rec)
		if strings.Join(strings.Fields(string(got)), " ") != "INT TERM" {
			t.Fatalf("the job saw %q, want INT then TERM", got)
		}
	})
	t.Run("ends on TERM: no SIGKILL", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 1<<20)
		rec := filepath.Join(b.dir, "signals")
		spec := b.spec(trapScript(rec, false))
		spec.KillGrace, spec.TermGrace = 300*time.Millisecond, time.Minute
		stop := make(chan struct{})
		done := make(chan Result)
		go func() { done <- Run(spec, b.log, stop) }()
		b.waitOutput(t, "ready")
		close(stop)
		res := <-done
		if res.ExitCode != -15 || res.KillSignal != syscall.SIGTERM {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("ends on INT", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 1<<20)
		spec := b.spec("echo ready; sleep 1000")
		spec.KillGrace, spec.TermGrace = time.Minute, time.Minute
		stop := make(chan struct{})
		done := make(chan Result)
		go func() { done <- Run(spec, b.log, stop) }()
		b.waitOutput(t, "ready")
		close(stop)
		if res := <-done; res.KillSignal != syscall.SIGINT || !res.Stopped {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("timeout climbs the ladder too", func(t *testing.T) {
		t.Parallel()
		untilStartedInTime(t, 500*time.Millisecond, func(timeout time.Duration) bool {
			b := setup(t, 1<<20)
			rec := filepath.Join(b.dir, "signals")
			spec := b.spec(trapScript(rec, true))
			spec.Timeout = timeout
			spec.KillGrace, spec.TermGrace = 200*time.Millisecond, 200*time.Millisecond
			res := Run(spec, b.log, nil)
			if !strings.Contains(b.output(t), "ready") {
				return false // its traps were not set yet when the ladder began
			}
			if res.ExitCode != -9 || !res.TimedOut || res.KillSignal != syscall.SIGKILL {
				t.Fatalf("%+v", res)
			}
			if got, _ := os.ReadFile(rec); strings.Join(strings.Fields(string(got)), " ") != "INT TERM" {
				t.Fatalf("the job saw %q, want INT then TERM", got)
			}
			return true
		})
	})
}

// TestRun_IdleTimeout (docs/job-endings.md, H1 and H2): a job silent for
// IdleTimeout is hung and stopped by the ladder; one that writes output
// more often than that runs to its end.
func TestRun_IdleTimeout(t *testing.T) {
	t.Parallel()
	t.Run("silent: hung", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 1<<20)
		spec := b.spec("echo started; sleep 1000")
		spec.IdleTimeout = time.Second
		res := Run(spec, b.log, nil)
		if !res.Hung || res.TimedOut || res.Stopped || res.KillSignal != syscall.SIGINT {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("talks: not hung", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 1<<20)
		spec := b.spec("for i in $(seq 12); do echo tick $i; sleep 0.25; done")
		spec.IdleTimeout = 2 * time.Second
		res := Run(spec, b.log, nil)
		if res.Hung || res.ExitCode != 0 || res.KillSignal != 0 {
			t.Fatalf("%+v", res)
		}
	})
}
