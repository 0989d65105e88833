package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/fusetest"
	"github.com/ttkit/ttkit/queued/execjob"
	"github.com/ttkit/ttkit/queued/jobcgroup"
)

// helperPaths runs f with a spare helper waiting (where jobs have no
// cgroup of their own): only a spare is prepared (Prepare).
func helperPaths(t *testing.T, f func(t *testing.T, b *bundle)) {
	t.Run("spare helper", func(t *testing.T) {
		if jobcgroup.Default() != nil {
			t.Skip("jobs run in cgroups of their own here: their helpers are started for them")
		}
		b := setup(t, 1<<20)
		warmSpare(t, b)
		f(t, b)
	})
}

// discardSpares ends every waiting spare, so the next start is a
// helper's own.
func discardSpares() {
	for deadline := time.Now().Add(30 * time.Second); refilling.Load() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	spares.Lock()
	all := spares.byHelper
	spares.byHelper = nil
	spares.Unlock()
	for _, list := range all {
		for _, sp := range list {
			sp.discard()
		}
	}
}

// waitReady waits until p's helper has taken every step and waits for
// its Go byte.
func waitReady(t *testing.T, p *Prepared) {
	t.Helper()
	if p.err != nil {
		t.Fatalf("prepare: %v", p.err)
	}
	waitFor(t, "the prepared helper to be ready", func() bool { return p.r.start.stage.Load() == execjob.StageReady })
}

// A prepared helper takes its steps and waits: the program runs only
// once Run takes it, and its process is the prepared helper.
func TestPrepare_ProgramRunsOnlyWhenRunTakesIt(t *testing.T) {
	for name, extra := range map[string]int{"small request": 0, "request larger than a pipe holds": 100 << 10} {
		t.Run(name, func(t *testing.T) { testPreparedRun(t, extra) })
	}
}

// testPreparedRun prepares and runs a job whose environment carries
// extra bytes more.
func testPreparedRun(t *testing.T, extra int) {
	helperPaths(t, func(t *testing.T, b *bundle) {
		mark := filepath.Join(b.dir, "ran")
		spec, pids := startedBy(b.spec("echo prepared ${#BIG}; touch " + mark))
		// In variables of 20 KiB: one string may not pass 128 KiB.
		big := "BIG="
		for i := 0; i < extra/(20<<10); i++ {
			spec.Env = append(spec.Env, "BIG"+strconv.Itoa(i)+"="+strings.Repeat("x", 20<<10))
			big += "$BIG" + strconv.Itoa(i)
		}
		spec.Cmd = big + "; " + spec.Cmd
		p := Prepare(spec, b.log)
		waitReady(t, p)
		time.Sleep(50 * time.Millisecond) // room for a program that would run early
		if _, err := os.Stat(mark); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the program ran before Run: %v", err)
		}
		spec.Prepared = p
		if res := Run(spec, b.log, nil); res.ExitCode != 0 || res.Iterations != 1 {
			t.Fatalf("%+v", res)
		}
		if pid := <-pids; pid != p.r.proc.PID {
			t.Errorf("the job ran as pid %d, not the prepared helper %d", pid, p.r.proc.PID)
		}
		if out := b.output(t); !strings.Contains(out, "prepared "+strconv.Itoa(extra)+"\n") {
			t.Errorf("output %q", out)
		}
		p.Cancel() // after Run: nothing
	})
}

// Cancel, a run that is stopped before it starts, and a request closed
// without its Go byte (a queued that died) all end the helper with the
// program never run.
func TestPrepare_CalledOffRunsNothing(t *testing.T) {
	for name, callOff := range map[string]func(t *testing.T, b *bundle, spec Spec, p *Prepared){
		"cancel": func(t *testing.T, b *bundle, spec Spec, p *Prepared) { p.Cancel() },
		"stopped before the run": func(t *testing.T, b *bundle, spec Spec, p *Prepared) {
			stop := make(chan struct{})
			close(stop)
			spec.Prepared = p
			if res := Run(spec, b.log, stop); !res.Stopped || res.Iterations != 0 {
				t.Fatalf("%+v", res)
			}
		},
		"request closed without Go": func(t *testing.T, b *bundle, spec Spec, p *Prepared) {
			p.r.handOff.cancel()
			var info syscall.WaitStatus
			waitFor(t, "the helper to exit by itself", func() bool {
				pid, err := syscall.Wait4(p.r.proc.PID, &info, syscall.WNOHANG, nil)
				return pid == p.r.proc.PID || errors.Is(err, syscall.ECHILD)
			})
			if !info.Exited() || info.ExitStatus() != execjob.FailCode {
				t.Errorf("the helper ended %v, want exit %d", info, execjob.FailCode)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			helperPaths(t, func(t *testing.T, b *bundle) {
				mark := filepath.Join(b.dir, "ran")
				spec := b.spec("touch " + mark)
				p := Prepare(spec, b.log)
				waitReady(t, p)
				callOff(t, b, spec, p)
				waitFor(t, "the helper to be gone", func() bool {
					return syscall.Kill(p.r.proc.PID, 0) != nil && !isOurZombie(p.r.proc.PID)
				})
				if _, err := os.Stat(mark); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("the program ran: %v", err)
				}
			})
		})
	}
}

// isOurZombie reports whether pid is a child of ours that exited and is
// not reaped yet.
func isOurZombie(pid int) bool {
	st, err := readStatFile("/proc/"+strconv.Itoa(pid)+"/stat", make([]byte, 1024))
	return err == nil && st.state == 'Z'
}

// A prepared helper stuck in a working directory that never answers is
// held like any start: Cancel returns at once and kills it, and a run
// that takes it bounds its start.
func TestPrepare_HangingDirectoryIsHeld(t *testing.T) {
	helperPaths(t, func(t *testing.T, b *bundle) {
		dir, abort := fusetest.HangingDir(t)
		spec := b.spec("echo never")
		spec.Dir = dir
		p := Prepare(spec, b.log)
		waitFor(t, "the helper to enter the directory", func() bool { return p.r.start.stage.Load() == execjob.StageChdir })
		cancelled := make(chan struct{})
		go func() { p.Cancel(); close(cancelled) }()
		select {
		case <-cancelled:
		case <-time.After(10 * time.Second):
			abort()
			t.Fatal("Cancel of a helper stuck in its working directory did not return")
		}
		waitFor(t, "the stuck helper to be killed", func() bool { return syscall.Kill(p.r.proc.PID, 0) != nil })

		p = Prepare(spec, b.log)
		spec.Prepared, spec.StartTimeout = p, 300*time.Millisecond
		res := within(t, runAsync(spec, b, nil), 10*time.Second, abort, "a prepared start whose working directory hangs")
		if res.Iterations != 0 || !errors.Is(res.Err, ErrStartHung) {
			t.Errorf("%+v, want a start that did not finish", res)
		}
	})
}

// A prepared start that fails says why, as a start of the run's own does.
func TestPrepare_FailedStartIsReportedByRun(t *testing.T) {
	helperPaths(t, func(t *testing.T, b *bundle) {
		spec := b.spec("echo never")
		spec.Dir = filepath.Join(b.dir, "missing")
		spec.Prepared = Prepare(spec, b.log)
		res := Run(spec, b.log, nil)
		if res.Iterations != 0 || !errors.Is(res.Err, syscall.ENOENT) || !strings.Contains(res.Err.Error(), "working directory") {
			t.Errorf("%+v, want the working directory's ENOENT", res)
		}
	})
}

// With SettleLater, Run returns a run's result and its whole output while
// what the run left is still being swept; Settled closes once every
// leftover is dead and the leader reaped. A repeated run's earlier
// iterations are settled before the next starts.
func TestRun_SettleLaterGivesTheResultFirstAndSettlesEveryLeftover(t *testing.T) {
	for _, c := range []struct {
		cmd    string
		repeat int
		want   int
	}{
		{"echo out; exit 0", 1, 0},
		{"echo out; exit 7", 1, 7},
		{"echo out; kill -TERM $$", 1, -int(syscall.SIGTERM)},
		{"echo out", 3, 0},
	} {
		t.Run(c.cmd, func(t *testing.T) {
			b := setup(t, 1<<20)
			pids := filepath.Join(b.dir, "pids")
			spec := b.spec("sleep 1000 & echo $! >> " + pids + "; setsid sleep 1000 & echo $! >> " + pids + "; " + c.cmd)
			spec.Env = append(spec.Env, JobEnvVar+"=settle-later-"+strconv.Itoa(os.Getpid()))
			spec.Repeat, spec.SettleLater = c.repeat, true
			res := Run(spec, b.log, nil)
			if res.ExitCode != c.want || res.Iterations != c.repeat || res.Err != nil {
				t.Fatalf("%+v, want exit %d after %d iterations", res, c.want, c.repeat)
			}
			if out := b.output(t); strings.Count(out, "out\n") != c.repeat {
				t.Errorf("output %q when Run returned", out)
			}
			if res.Settled == nil {
				t.Fatal("no Settled channel")
			}
			select {
			case <-res.Settled:
			case <-time.After(30 * time.Second):
				t.Fatal("Settled did not close in 30 s")
			}
			b2, err := os.ReadFile(pids)
			if err != nil {
				t.Fatal(err)
			}
			left := strings.Fields(string(b2))
			if len(left) != 2*c.repeat {
				t.Fatalf("the job started %v, want %d processes", left, 2*c.repeat)
			}
			for _, p := range left {
				pid, _ := strconv.Atoi(p)
				if st, err := readStat("/proc", pid); err == nil && st.state != 'Z' {
					t.Errorf("leftover %d still alive (%c) once settled", pid, st.state)
				}
			}
		})
	}
}

// Without a waiting spare, Prepare prepares nothing (starting a helper
// would take CPU from the commit beside it) and Run starts the job's
// helper itself; Cancel of such a preparation does nothing.
func TestPrepare_WithoutASpareRunStartsTheHelper(t *testing.T) {
	b := setup(t, 1<<20)
	discardSpares()
	spec := b.spec("echo ran")
	p := Prepare(spec, b.log)
	if p.r != nil || p.err != nil {
		t.Fatalf("prepared %+v, %v without a spare; want nothing", p.r, p.err)
	}
	spec.Prepared = p
	if res := Run(spec, b.log, nil); res.ExitCode != 0 || res.Iterations != 1 {
		t.Fatalf("%+v", res)
	}
	if out := b.output(t); !strings.Contains(out, "ran\n") {
		t.Errorf("output %q", out)
	}
	Prepare(spec, b.log).Cancel()
}
