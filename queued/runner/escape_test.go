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
	var pid int
	waitFor(t, "the escaper to start", func() bool {
		b, err := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	return pid
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
			b := setup(t, 1<<20)
			spec, pidFile := escaperSpec(t, b, tc.then)
			spec.Timeout = 10 * time.Second
			if tc.name == "timeout" {
				spec.Timeout = time.Second
			}
			done := runAsync(spec, b, nil)
			pid := escaperPID(t, pidFile)
			res := within(t, done, 20*time.Second, killer(pid), "a job with an escaper")
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
