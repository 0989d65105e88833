package slurmcheck

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// fakeSqueue writes a squeue that prints state for job 1, fails as Slurm
// does for an unknown job 2, prints nothing for job 3 and cannot reach
// slurmctld for job 4.
func fakeSqueue(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "squeue")
	script := `#!/bin/sh
case "$3" in
1) cat "$(dirname "$0")/state" ;;
2) echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1 ;;
3) ;;
5) [ -n "$SLURM_CONF" ] && [ -f "$SLURM_CONF" ] && echo RUNNING ||
   { echo "slurm_load_jobs error: Unable to contact slurm controller (connect failure)" >&2; exit 1; } ;;
*) echo "slurm_load_jobs error: Unable to contact slurm controller" >&2; exit 1 ;;
esac
`
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestGone(t *testing.T) {
	t.Parallel()
	p := fakeSqueue(t)
	gone := Gone(p)
	for _, tc := range []struct {
		id, state string
		gone, err bool
	}{
		{"1", "RUNNING", false, false},
		{"1", "COMPLETED", true, false},
		{"1", "NODE_FAIL", true, false},
		// Requeued: Slurm starts it again later, maybe on another node,
		// whose Prolog takes a hold of its own.
		{"1", "PENDING", true, false},
		{"1", "REQUEUED", true, false},
		{"1", "REQUEUE_HOLD", true, false},
		{"1", "REQUEUE_FED", true, false},
		{"1", "REVOKED", true, false},
		// Still on the node: suspended, or ending (the Epilog releases).
		{"1", "SUSPENDED", false, false},
		{"1", "COMPLETING", false, false},
		{"1", "CONFIGURING", false, false},
		// A heterogeneous or array job prints a line per component: gone
		// once none of them holds the node.
		{"1", "RUNNING\nCOMPLETED", false, false},
		{"1", "COMPLETED\nCANCELLED", true, false},
		{"2", "", true, false},
		{"3", "", true, false},
		{"4", "", false, true},
		{"1 2", "", false, true},
	} {
		if err := os.WriteFile(filepath.Join(filepath.Dir(p), "state"), []byte(tc.state+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		g, why, err := gone(context.Background(), tc.id)
		if g != tc.gone || (err != nil) != tc.err {
			t.Errorf("job %s in %s: gone %v (%s), %v", tc.id, tc.state, g, why, err)
		}
	}
	if p, err := Find("off"); p != "" || err != nil {
		t.Errorf("off: %q %v", p, err)
	}
	if _, err := Find("/nonexistent/squeue"); err == nil {
		t.Error("a missing squeue was taken")
	}
}

// A host whose slurm.conf is not at the compiled-in path names it with
// SLURM_CONF in queued's environment; squeue gets it, or it cannot find
// slurmctld and every hold would stay forever.
func TestGone_PassesSlurmConf(t *testing.T) {
	p := fakeSqueue(t)
	conf := filepath.Join(t.TempDir(), "slurm.conf")
	if err := os.WriteFile(conf, []byte("ClusterName=test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLURM_CONF", conf)
	g, why, err := Gone(p)(context.Background(), "5")
	if g || err != nil || why != "running" {
		t.Errorf("with SLURM_CONF=%s: gone %v (%s), %v", conf, g, why, err)
	}
}
