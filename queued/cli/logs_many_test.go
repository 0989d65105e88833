package cli_test

import (
	"strings"
	"testing"
)

// logs -f ID ID follows several jobs at once, each line prefixed by its
// job, and exits with the worst status.
func TestLogs_FollowSeveralJobs(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	g := newGate(t)
	a := d.queueID("--device", "0", "--", "echo a1; "+g.wait()+"; echo a2")
	b := d.queueID("--device", "1", "--", "echo b1; "+g.wait()+"; echo b2; exit 4")
	d.waitState(a, "running")
	d.waitState(b, "running")
	g.open(t)
	r := d.run("logs", "-f", a, b)
	r.want(t, 4, nil, nil)
	for _, line := range []string{"[" + a[:8] + "] a1\n", "[" + a[:8] + "] a2\n", "[" + b[:8] + "] b1\n", "[" + b[:8] + "] b2\n"} {
		if !strings.Contains(r.stdout, line) {
			t.Fatalf("logs -f of two jobs lacks %q:\n%v", line, r)
		}
	}
}
