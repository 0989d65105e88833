package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/fusetest"
	"github.com/ttkit/ttkit/internal/proctest"
	"github.com/ttkit/ttkit/queued/account"
	"github.com/ttkit/ttkit/queued/jobcgroup"
)

// warmSpare runs a job, so that a spare helper waits for the next one,
// and returns this process's children then, the spare among them.
func warmSpare(t *testing.T, b *bundle) map[int]bool {
	t.Helper()
	if jobcgroup.Default() != nil {
		t.Skip("jobs run in cgroups of their own here: their helpers are started for them")
	}
	spec := b.spec("true")
	if res := Run(spec, b.log, nil); res.ExitCode != 0 {
		t.Fatalf("warming up: %+v", res)
	}
	// The spare is started off the job's loop: wait for it.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if waiting(spec.Helper) > 0 && !refilling.Load() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no spare helper waits 30 s after a job ran")
		}
	}
	return proctest.Children(os.Getpid())
}

// startedBy returns spec with an OnStart that reports the iteration's
// leader on the channel.
func startedBy(spec Spec) (Spec, <-chan int) {
	pids := make(chan int, 1)
	spec.OnStart = func(p Proc) {
		select {
		case pids <- p.PID:
		default:
		}
	}
	return spec, pids
}

// wantSpare fails unless pid, the job's leader, was waiting before the
// job was run.
func wantSpare(t *testing.T, before map[int]bool, pids <-chan int) {
	t.Helper()
	select {
	case pid := <-pids:
		if !before[pid] {
			t.Fatalf("the job's helper %d was started for it; want the spare waiting before it (children then: %v)", pid, before)
		}
	default:
		t.Fatal("the job never started")
	}
}

// While a job runs, the next job's exec helper is started and waits for
// its request: the next job is that process.
func TestRun_NextJobsHelperWaitsWhileAJobRuns(t *testing.T) {
	b := setup(t, 1<<20)
	before := warmSpare(t, b)
	spec, pids := startedBy(b.spec("echo from-the-spare"))
	if res := Run(spec, b.log, nil); res.ExitCode != 0 || res.Iterations != 1 {
		t.Fatalf("%+v", res)
	}
	wantSpare(t, before, pids)
	if out := b.output(t); !strings.Contains(out, "from-the-spare\n") {
		t.Fatalf("output %q", out)
	}
}

// A job started by a spare helper is held as one started for it: a
// working directory that never answers is bounded, a user that cannot
// be switched to is a start that failed, and a process that forks and
// leaves dies with the job.
func TestRun_SpareHelperHoldsTheJob(t *testing.T) {
	t.Run("directory never answers", func(t *testing.T) {
		b := setup(t, 1<<20)
		before := warmSpare(t, b)
		spec, pids := startedBy(b.spec("echo never"))
		var abort func()
		spec.Dir, abort = fusetest.HangingDir(t)
		spec.Timeout = 500 * time.Millisecond
		res := within(t, runAsync(spec, b, nil), 10*time.Second, abort, "a spare's job whose working directory hangs")
		if res.ExitCode != -9 || !res.TimedOut || res.Iterations != 0 {
			t.Errorf("%+v, want a timeout before the program started", res)
		}
		wantSpare(t, before, pids)
	})
	t.Run("user cannot be switched to", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root")
		}
		b := setup(t, 1<<20)
		before := warmSpare(t, b)
		// More supplementary groups than the kernel takes (NGROUPS_MAX).
		a := account.Account{UID: 4242, GID: 4242, Name: "nobody-here", Groups: make([]uint32, 70000)}
		spec, pids := startedBy(b.spec("echo never"))
		spec.Account = &a
		res := Run(spec, b.log, nil)
		if res.Iterations != 0 || res.ExitCode != -1 || !errors.Is(res.Err, syscall.EINVAL) {
			t.Errorf("%+v, want the switch to the user to fail (EINVAL)", res)
		}
		wantSpare(t, before, pids)
	})
	t.Run("forks and leaves", func(t *testing.T) {
		if !auditSessions() {
			t.Skip("this kernel gives no audit sessions (CONFIG_AUDIT, or CAP_AUDIT_CONTROL over a set loginuid)")
		}
		b := setup(t, 1<<20)
		before := warmSpare(t, b)
		spec, pidFile := escaperSpec(t, b, "while [ ! -s escaper.pid ]; do sleep 0.05; done")
		spec, pids := startedBy(spec)
		spec.Timeout = 10 * time.Second
		done := runAsync(spec, b, nil)
		pid := escaperPID(t, pidFile)
		if res := within(t, done, 20*time.Second, killer(pid), "a spare's job with an escaper"); res.ExitCode != 0 {
			t.Fatalf("%+v: %s", res, b.output(t))
		}
		wantSpare(t, before, pids)
		waitFor(t, "the escaper to die with its job", func() bool { return dead(pid) })
	})
}

// The next job's helper is started once a job's program has ended, not
// as it starts: on our machines a process started beside bash's start
// slowed it by a third (issue 41), which a job on an idle card waited
// for. While the job runs, with a spare still waiting, no other is
// started.
func TestRun_NextJobsHelperStartsOnceTheJobEnds(t *testing.T) {
	b := setup(t, 1<<20)
	warmSpare(t, b)
	// Both spares waiting, so one is left while the job runs.
	if res := Run(b.spec("true"), b.log, nil); res.ExitCode != 0 {
		t.Fatalf("%+v", res)
	}
	waitFor(t, "both spares", func() bool { return waiting("") == maxSpares && !refilling.Load() })
	spec := b.spec("touch running; while [ ! -e go ]; do sleep 0.01; done")
	done := runAsync(spec, b, nil)
	waitFor(t, "the job to run", func() bool { _, err := os.Stat(filepath.Join(b.dir, "running")); return err == nil })
	// Long enough for a start at the program's exec to show: the job's
	// loop reads the exec within milliseconds.
	time.Sleep(300 * time.Millisecond)
	if got, busy := waiting(""), refilling.Load(); got != maxSpares-1 || busy {
		t.Errorf("while the job runs: %d spares wait (refilling: %v), want %d and none starting", got, busy, maxSpares-1)
	}
	if err := os.WriteFile(filepath.Join(b.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := within(t, done, 10*time.Second, func() {}, "the job"); res.ExitCode != 0 {
		t.Fatalf("%+v", res)
	}
	waitFor(t, "a spare in the job's place", func() bool { return waiting("") == maxSpares && !refilling.Load() })
}

// Where no spare waits at all (the first jobs of a host's cards, started
// while none has ended), a job's exec starts one, so the next card's job
// need not start its own helper while this one runs for hours.
func TestRun_AJobStartsASpareWhenNoneWaits(t *testing.T) {
	b := setup(t, 1<<20)
	warmSpare(t, b)
	for sp := takeSpare(""); sp != nil; sp = takeSpare("") {
		sp.discard()
	}
	spec := b.spec("while [ ! -e go ]; do sleep 0.01; done")
	done := runAsync(spec, b, nil)
	waitFor(t, "a spare started while the job runs", func() bool { return waiting("") > 0 })
	select {
	case res := <-done:
		t.Fatalf("the job ended before its release: %+v", res)
	default:
	}
	if err := os.WriteFile(filepath.Join(b.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := within(t, done, 10*time.Second, func() {}, "the job"); res.ExitCode != 0 {
		t.Fatalf("%+v", res)
	}
}
