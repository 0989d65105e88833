package cli_test

import (
	"os/user"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/api"
)

// TestList shows running, queued and finished jobs with their card,
// position and owner, filtered by card, state and owner, bounded, and as
// JSON; the owner defaults to the user name.
func TestList(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	done := strings.TrimSpace(d.run("queue", "--device", "1", "--", "true").stdout)
	d.run("result", done).want(t, 0, nil, nil)
	g := newGate(t)
	defer g.open(t)
	running := strings.TrimSpace(d.run("queue", "--", "echo running; "+g.wait()).stdout)
	d.waitState(running, "running")
	mine := strings.TrimSpace(d.run("queue", "--", "echo mine").stdout)
	theirs := strings.TrimSpace(d.run("--client-id", "alice", "queue", "--", "echo theirs").stdout)

	out := d.run("list")
	out.want(t, 0, []string{"ID", "CARD", "STATE", "POS", "OWNER", "SUBMITTED", "RUNTIME/OUTCOME", "COMMAND",
		running[:8], mine[:8], theirs[:8], done[:8], "success (0)", "alice", me.Username}, nil)
	lines := strings.Split(strings.TrimSpace(out.stdout), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[1], running[:8]) || !strings.HasPrefix(lines[2], mine[:8]) ||
		!strings.HasPrefix(lines[3], theirs[:8]) || !strings.HasPrefix(lines[4], done[:8]) {
		t.Fatalf("list order: running, then the queue, then finished:\n%s", out.stdout)
	}

	var jobs []api.Job
	decode(t, d.run("--json", "list", "--device", "0", "--state", "queued"), &jobs)
	if len(jobs) != 2 || jobs[0].ID != mine || jobs[0].Position != 1 || jobs[1].ID != theirs || jobs[1].Position != 2 {
		t.Fatalf("list --device 0 --state queued: %+v", jobs)
	}
	decode(t, d.run("--json", "list", "--mine"), &jobs)
	for _, j := range jobs {
		if j.ClientID != me.Username {
			t.Fatalf("list --mine has %s of %q", j.ID, j.ClientID)
		}
	}
	if len(jobs) != 3 {
		t.Fatalf("list --mine: %d jobs, want 3", len(jobs))
	}
	decode(t, d.run("--json", "list", "--limit", "1"), &jobs)
	if len(jobs) != 1 || jobs[0].ID != running {
		t.Fatalf("list --limit 1: %+v", jobs)
	}
	decode(t, d.run("--json", "list", "--state", "done", "--device", "0"), &jobs)
	if len(jobs) != 0 {
		t.Fatalf("no finished job on card 0, got %+v", jobs)
	}
	d.run("list", "--state", "finished").want(t, 2, nil, []string{"--state"})
	d.run("list", "--limit", "0").want(t, 2, nil, []string{"--limit 0"})
}
