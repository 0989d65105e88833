package cli_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// Through the daemon and the CLI (docs/job-endings.md, H1, R1, R2): a
// job queued with --idle-timeout and --retries that hangs once is ended
// as hung and run again; `--json job` holds both attempts, `job` and its
// output say "attempt 2/2"; `run` of a job that hangs exits 252 (-124).
func TestQueue_HungJobIsRetried(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	counter := filepath.Join(t.TempDir(), "count")
	cmd := fmt.Sprintf(`n=$(cat %[1]q 2>/dev/null || echo 0); n=$((n+1)); echo $n > %[1]q; echo run $n; if [ $n -lt 2 ]; then sleep 1000; fi`, counter)
	r := d.run("queue", "--idle-timeout", "1", "--retries", "1", "--", cmd)
	if r.code != 0 {
		t.Fatal(r)
	}
	id := strings.TrimSpace(r.stdout)
	j := d.waitState(id, "done")
	if j.Outcome != "success" || j.Attempt != 2 || j.Retries != 1 || j.IdleTimeout != 1 || len(j.Attempts) != 1 {
		t.Fatalf("want success on attempt 2 of 2 after a hang: %+v", j)
	}
	if a := j.Attempts[0]; a.Attempt != 1 || a.Outcome != "hung" || a.ExitCode != -124 || a.KillRung != "SIGINT" {
		t.Fatalf("the first attempt: %+v", a)
	}
	d.run("job", id).want(t, 0, []string{"attempt 2/2", "attempt 1: hung", "succeeded on attempt 2/2"}, nil)
	d.run("logs", id).want(t, 0, []string{"attempt 1/2", "run 1", "wrote no output for 1s", "attempt 2/2", "run 2"}, nil)

	hung := d.run("run", "--idle-timeout", "1", "--", "echo started; sleep 1000")
	if hung.code != 252 || !strings.Contains(hung.stderr, "hung: exit code -124 (status 252): wrote no output for 1s") {
		t.Fatalf("run of a hung job: want exit 252 (-124) and why, got %v", hung)
	}
}

// R5: --retries past its bound, and a negative --idle-timeout, are
// refused before anything is queued, naming the value.
func TestQueue_EndingLimitsRefused(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.run("queue", "--retries", "11", "--", "true").want(t, 2, nil, []string{"--retries 11", "0 to 10"})
	d.run("queue", "--idle-timeout", "-1", "--", "true").want(t, 2, nil, []string{"--idle-timeout"})
}
