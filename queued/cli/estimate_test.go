package cli_test

import (
	"os"
	"strings"
	"testing"
)

// TestEstimates_UnknownAndOverdue: a command that never ran on the card
// has an unknown run time, not another command's; a run past its
// command's usual time reads "overdue by".
func TestEstimates_UnknownAndOverdue(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	g := newGate(t)
	defer g.open(t)
	cmd := "echo started; " + g.wait()
	first := strings.TrimSpace(d.run("queue", "--", cmd).stdout)
	d.waitState(first, "running")
	d.run("job", first).want(t, 0, []string{"time left unknown"}, nil)
	fresh := strings.TrimSpace(d.run("queue", "--", "echo never seen").stdout)
	d.run("job", fresh).want(t, 0, []string{"then an unknown time"}, nil)
	g.open(t)
	d.run("result", first).want(t, 0, nil, nil)
	d.run("result", fresh).want(t, 0, nil, nil)

	// The same command again: known now, and soon past its (short) usual
	// time while the gate stays shut.
	if err := os.Remove(string(g)); err != nil {
		t.Fatal(err)
	}
	second := strings.TrimSpace(d.run("queue", "--", cmd).stdout)
	d.waitState(second, "running")
	deadline := 100
	for i := 0; ; i++ {
		r := d.run("job", second)
		if strings.Contains(r.stdout, "overdue by") {
			break
		}
		if i > deadline {
			t.Fatalf("a run past its command's usual time never read overdue:\n%s", r.stdout)
		}
		if strings.Contains(r.stdout, "unknown") {
			t.Fatalf("a command that ran before has an unknown estimate:\n%s", r.stdout)
		}
	}
}
