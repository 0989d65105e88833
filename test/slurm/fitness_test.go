//go:build slurm

package slurm

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/usertest"
	"github.com/ttkit/ttkit/queued/api"
)

// unfitCardDrainsTheNode: both cards' firmware heartbeats stop, so queued
// finds them unfit and climbs their recovery ladder, but the fake reset
// (it exits 0) leaves them stalled, as tt-smi -r can, so the ladder ends
// with the cards dead (docs/fitness.md). The Prolog's gate waits
// TT_SLURM_FIT_WAIT (20 s here) and fails: Slurm drains the node and
// requeues the job held, with the card and the reason in the scripts' log
// and the job's program never run. The heartbeats moving again and the
// node resumed, the next job runs (docs/slurm.md, "A card that is not
// fit").
func unfitCardDrainsTheNode(t *testing.T, c *cluster, u usertest.User) {
	t.Cleanup(func() {
		c.stall(0, false)
		c.stall(1, false)
		// A dead card comes back by a reset whose ladder the gate verifies.
		for _, card := range []string{"0", "1"} {
			c.q.ttq(t, nil, "reset", "--device", card)
		}
		eventually(t, 2*time.Minute, "both cards healthy again", func() (bool, string) {
			r := c.q.ttq(t, nil, "--json", "status")
			var st api.Status
			if json.Unmarshal([]byte(r.stdout), &st) != nil || len(st.Cards) != 2 {
				return false, r.String()
			}
			return st.Cards[0].State == "healthy" && st.Cards[1].State == "healthy", r.String()
		})
		c.cancelAll()
		c.slurm(t, "scontrol", "update", "NodeName="+nodeName, "State=RESUME")
		eventually(t, time.Minute, "the node is idle again", func() (bool, string) {
			r := c.slurm(t, "sinfo", "-h", "-N", "-o", "%T")
			return strings.TrimSpace(r.stdout) == "idle", r.String()
		})
	})
	c.stall(0, true)
	c.stall(1, true)
	// Both unfit, then dead once their ladders are exhausted: either way
	// not fit for a job, for the stalled heartbeat.
	eventually(t, time.Minute, "queued finds both cards not fit", func() (bool, string) {
		r := c.q.ttq(t, nil, "--json", "status")
		var st api.Status
		if json.Unmarshal([]byte(r.stdout), &st) != nil || len(st.Cards) != 2 {
			return false, r.String()
		}
		for _, card := range st.Cards {
			if (card.State != "unfit" && card.State != "dead") || !strings.Contains(card.Reason, "heartbeat stalled since") {
				return false, r.String()
			}
		}
		return true, ""
	})
	b := newBench(t, u)
	b.release(t, "slurm")
	id := c.sbatch(t, u, []string{"--gres=tt:1", "--output=" + b.dir + "/%j.out"}, b.script, "slurm", b.dir)
	c.logHas(t, 2*time.Minute, "prolog", "job "+id+": error: tt card(s) ", "not fit for this job: ", "heartbeat stalled since",
		"failing the Prolog: Slurm drains the node and requeues the job")
	eventually(t, time.Minute, "the node drained and the job requeued", func() (bool, string) {
		node := c.slurm(t, "sinfo", "-h", "-N", "-o", "%T")
		state, _ := c.job(t, id)
		return strings.HasPrefix(strings.TrimSpace(node.stdout), "drain") && state == "PENDING", "node " + node.stdout + ", job " + state
	})
	if r := c.slurm(t, "scontrol", "-o", "show", "job", id); !strings.Contains(r.stdout, "Reason=launch_failed_requeued_held") {
		t.Errorf("the requeued job: %v", r)
	}
	if strings.Contains(readFile(filepath.Join(b.dir, "timeline")), "start") {
		t.Errorf("the job's program ran on an unfit card: %q", b.timeline())
	}
}
