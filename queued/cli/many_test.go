package cli_test

import (
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/api"
)

// TestWaitKillResubmit: wait takes several jobs and exits with the worst
// status; kill takes several ids and --device/--mine; resubmit queues the
// same program with the same directory, environment, timeout and repeat.
func TestWaitKillResubmit(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	ok := strings.TrimSpace(d.run("queue", "--device", "1", "--", "true").stdout)
	bad := strings.TrimSpace(d.run("queue", "--device", "1", "--", "exit 3").stdout)
	sig := strings.TrimSpace(d.run("queue", "--device", "0", "--", "kill -TERM $$").stdout)
	r := d.run("wait", ok, bad[:8], sig)
	r.want(t, 128+15, []string{ok + " card 1: succeeded", bad + " card 1: failed: exit code 3", sig + " card 0: failed: exit code -15"}, nil)
	d.run("wait", ok).want(t, 0, []string{"succeeded"}, nil)
	d.run("wait").want(t, 2, nil, []string{"--device N or --mine"})

	g := newGate(t)
	defer g.open(t)
	running := strings.TrimSpace(d.run("queue", "--", "echo running; "+g.wait()).stdout)
	d.waitState(running, "running")
	q1 := strings.TrimSpace(d.run("queue", "--", "echo q1").stdout)
	q2 := strings.TrimSpace(d.run("--client-id", "alice", "queue", "--", "echo q2; "+g.wait()).stdout)
	q3 := strings.TrimSpace(d.run("queue", "--device", "1", "--", "echo q3; "+g.wait()).stdout)

	// Two ids at once, one of them already finished: the other is killed,
	// the refusal named, exit 1.
	k := d.run("kill", q1, ok)
	k.want(t, 1, []string{"killed job " + q1 + " before it started"}, []string{ok + ": queued refused the request", "already finished"})
	// --device 0 --mine: my active jobs on card 0 (the running one), not
	// alice's, not card 1's.
	d.run("kill", "--device", "0", "--mine").want(t, 0, []string{"stopping job " + running}, nil)
	var j api.Job
	decode(t, d.run("--json", "job", q2), &j)
	if j.Done() {
		t.Fatalf("alice's job after my kill --mine: %+v", j)
	}
	d.run("--client-id", "alice", "kill", "--mine").want(t, 0, []string{q2}, nil)

	// resubmit: same program, directory, environment, timeout and repeat,
	// on another card when asked.
	orig := strings.TrimSpace(d.run("queue", "--device", "1", "--timeout", "77", "--repeat", "2", "-e", "GREETING=hi", "--",
		`echo "$GREETING from $TT_QUEUE_DEVICE"`).stdout)
	g.open(t)
	d.run("result", q3).want(t, 0, nil, nil)
	d.run("result", orig).want(t, 0, []string{"Repeat 1/2\nhi from 1\n\n[tt-device-queue] Repeat 2/2\nhi from 1\n"}, nil)
	again := d.run("resubmit", orig[:10], "--device", "0")
	again.want(t, 0, nil, []string{"resubmitted " + orig})
	id := strings.TrimSpace(again.stdout)
	d.run("result", id).want(t, 0, []string{"Repeat 1/2\nhi from 0\n\n[tt-device-queue] Repeat 2/2\nhi from 0\n"}, nil)
	var old, copy api.Job
	decode(t, d.run("--json", "job", orig), &old)
	decode(t, d.run("--json", "job", id), &copy)
	if copy.Cmd != old.Cmd || copy.Cwd != old.Cwd || copy.Timeout != 77 || copy.Repeat != 2 || copy.Env["GREETING"] != "hi" || copy.DeviceID != "0" {
		t.Fatalf("resubmitted %+v\nfrom %+v", copy, old)
	}
}
