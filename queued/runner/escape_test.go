package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// escaperSpec is a job that starts, the way a user would, a process that
// sheds everything the runner used to find a job's processes by: its
// marker (env -u), its session and process group (setsid), its parent
// (setsid -f forks, and the fork's parent exits at once). then is the
// rest of the job's program; the escaper's pid lands in the returned file.
func escaperSpec(t *testing.T, b *bundle, then string) (Spec, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(b.dir, "escaper.pid")
	marker := fmt.Sprintf("escape-%d-%d", os.Getpid(), hostileJobs.Add(1))
	spec := b.spec(fmt.Sprintf("env -u %s %s=pidsleep RUNNER_TEST_PIDFILE=%s setsid -f %s; %s",
		JobEnvVar, hostileEnv, pidFile, self, then))
	spec.Env = append(testEnv(), JobEnvVar+"="+marker)
	return spec, pidFile
}

// escaperPID waits for the escaper to write its pid.
func escaperPID(t *testing.T, pidFile string) int {
	t.Helper()
	pid, _, _ := escaperOrEnd(t, pidFile, nil)
	return pid
}

// escaperOrEnd waits for the escaper to write its pid or for the job to
// end (done; nil when the caller waits for the escaper alone), whichever
// comes first: pid is 0 when the job ended before an escaper was started
// (its timeout fired first on a loaded machine). The escaper is killed
// when the test ends.
func escaperOrEnd(t *testing.T, pidFile string, done <-chan Result) (pid int, res Result, ended bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		b, _ := os.ReadFile(pidFile)
		if pid, _ = strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 {
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			return pid, res, ended
		}
		if ended { // read once more after the end: nothing
			return 0, res, true
		}
		select {
		case res = <-done:
			ended = true
		case <-time.After(5 * time.Millisecond):
		case <-deadline:
			t.Fatal("timed out waiting for the escaper to start")
		}
	}
}

// Without a delegated cgroup, a process that leaves its job's session,
// drops its marker and is reparented away still dies with its job: by
// its audit session, which it cannot shed. Both at the job's own end and
// at a kill (its timeout).
func TestRun_EscaperWithoutMarkerOrSessionDiesWithItsJob(t *testing.T) {
	if !auditSessions() {
		t.Skip("this kernel gives no audit sessions (CONFIG_AUDIT, or CAP_AUDIT_CONTROL over a set loginuid)")
	}
	for _, tc := range []struct{ name, then string }{
		{"end", "while [ ! -s escaper.pid ]; do sleep 0.05; done"},
		{"timeout", "sleep 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			first := 10 * time.Second
			if tc.name == "timeout" {
				first = time.Second
			}
			untilStartedInTime(t, first, func(timeout time.Duration) bool {
				b := setup(t, 1<<20)
				spec, pidFile := escaperSpec(t, b, tc.then)
				spec.Timeout = timeout
				done := runAsync(spec, b, nil)
				pid, res, ended := escaperOrEnd(t, pidFile, done)
				if pid == 0 {
					return false // its timeout fired before the escaper was started
				}
				if !ended {
					res = within(t, done, 20*time.Second, killer(pid), "a job with an escaper")
				}
				if tc.name == "end" && res.ExitCode != 0 || tc.name == "timeout" && !res.TimedOut {
					t.Fatalf("%+v: %s", res, b.output(t))
				}
				deadline := time.Now().Add(30 * time.Second)
				for !dead(pid) {
					if time.Now().After(deadline) {
						st, _ := readStat("/proc", pid)
						t.Fatalf("the escaper %d (session %d) outlived its job", pid, st.session)
					}
					time.Sleep(10 * time.Millisecond)
				}
				return true
			})
		})
	}
}

// After a restart, the leftovers of a job whose leader still runs include
// its escaper: found by the leader's audit session, though it carries no
// marker and left the job's session.
func TestKillLeftovers_EscaperFoundByTheLeadersAuditSession(t *testing.T) {
	if !auditSessions() {
		t.Skip("no audit sessions here")
	}
	t.Parallel()
	b := setup(t, 1<<20)
	spec, pidFile := escaperSpec(t, b, "sleep 1000")
	// Started by hand, so no run of this queued sweeps after it: as a
	// restarted queued finds it, by its record alone.
	r, err := start(&spec, b.log, false)
	if err != nil {
		t.Fatal(err)
	}
	r.handOff.release()
	defer r.finish()
	pid := escaperPID(t, pidFile)
	killed, err := KillLeftovers("/proc", []Leftover{{JobID: "not-its-marker", PGID: r.proc.PID, LeaderStart: r.proc.Start, UID: uint32(os.Geteuid())}}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the escaper to die", func() bool { return dead(pid) })
	t.Logf("killed %v", killed)
}
