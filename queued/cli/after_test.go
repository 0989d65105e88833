package cli_test

import (
	"strings"
	"testing"

	"github.com/ttkit/ttkit/internal/usertest"
)

// queueID queues with the CLI and returns the new job's id.
func (d *daemon) queueID(args ...string) string {
	d.t.Helper()
	r := d.run(append([]string{"queue"}, args...)...)
	r.want(d.t, 0, nil, nil)
	return strings.TrimSpace(r.stdout)
}

// --after: the waiting job keeps its place without holding up the job
// behind it, shows what it waits for in job, list and status, and runs
// once its dependency succeeded; afterok of a failed job ends it with
// outcome dependency naming the job; a bad dependency is refused.
func TestQueue_After(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	g := newGate(t)
	dep := d.queueID("--device", "1", "--", g.wait())
	d.waitState(dep, "running")
	waiting := d.queueID("--after", dep[:8], "--", "echo after")
	behind := d.queueID("--", "echo behind")
	if j := d.waitState(behind, "done"); j.Outcome != "success" {
		t.Fatalf("the job behind the waiting one: %s %q", j.Outcome, j.Error)
	}
	j := d.job(waiting)
	if j.State != "queued" || len(j.WaitsFor) != 1 || j.WaitsFor[0] != dep || len(j.After) != 1 || j.AfterMode != "ok" {
		t.Fatalf("the waiting job: %s, after %v (%s), waits for %v", j.State, j.After, j.AfterMode, j.WaitsFor)
	}
	d.run("job", waiting).want(t, 0, []string{"waits for", dep[:8]}, nil)
	d.run("list").want(t, 0, []string{"after " + dep[:8]}, nil)
	d.run("status").want(t, 0, []string{"job " + waiting[:8] + " waits for " + dep[:8]}, nil)
	g.open(t)
	d.run("wait", waiting).want(t, 0, nil, nil)

	failed := d.queueID("--", "exit 3")
	d.waitState(failed, "done")
	never := d.queueID("--after", failed, "--", "echo never")
	if j := d.waitState(never, "done"); j.Outcome != "dependency" || !strings.Contains(j.Error, failed) || j.StartedAt != nil {
		t.Fatalf("afterok of a failed job: %s %q started %v", j.Outcome, j.Error, j.StartedAt)
	}
	d.run("queue", "--after", failed, "--after-mode", "notok", "--", "true").want(t, 0, nil, nil)

	d.run("queue", "--after", "0123456789abcdef", "--", "true").want(t, 1, nil, []string{"after \"0123456789abcdef\"", "no such job"})
	d.run("queue", "--after", dep, "--after-mode", "sometimes", "--", "true").want(t, 2, nil, []string{"sometimes"})
}

// In system mode a user may wait only for jobs they may see: their own.
func TestSystemMode_AfterAnotherUsersJobIsRefused(t *testing.T) {
	alice, bob := usertest.New(t, "ttqa"), usertest.New(t, "ttqb")
	s := startShared(t)
	r := s.run(alice, "queue", "--device", "0", "--", "true")
	r.want(t, 0, nil, nil)
	job := strings.TrimSpace(r.stdout)
	s.run(bob, "queue", "--after", job, "--", "true").want(t, 1, nil, []string{"belongs to " + alice.Name})
	s.run(alice, "queue", "--after", job, "--", "true").want(t, 0, nil, nil)
}
