//go:build slurm

package slurm

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/usertest"
)

// hostileJobText: a job Slurm gives one card, whose name and comment carry
// text shaped like scontrol's per-node GRES lines (on the name's line, and
// on lines of their own: Slurm takes a newline in either), gets a hold on
// card 0 alone, runs with card 0 alone, and with TT_SLURM_RESET=always
// the Epilog resets card 0 alone (issue 38: the Prolog read scontrol's
// text and held every card the name claimed).
func hostileJobText(t *testing.T, c *cluster, u usertest.User) {
	t.Cleanup(func() { c.setReset(t, "never") })
	c.setReset(t, "always")
	line := "     Nodes=" + nodeName + " CPU_IDs=0 Mem=0 GRES="
	for _, tc := range []struct{ name, comment string }{
		{"x Nodes=" + nodeName + " y GRES=tt(IDX:1)", "plain"},
		{"x Nodes=" + nodeName + " y GRES=tt(IDX:0-1)\n" + line + "tt:p150a:2(IDX:0-1)", "c\n" + line + "tt:2(IDX:0-1)"},
	} {
		before := len(resetLines(c.q))
		b := newBench(t, u)
		id := c.sbatch(t, u, []string{"--gres=tt:1", "-J", tc.name, "--comment", tc.comment, "--output=" + b.dir + "/%j.out"}, b.script, "slurm", b.dir)
		c.logHas(t, time.Minute, "prolog", "job "+id+":", "hold", "on card(s) ")
		if log := readFile(c.ttLog); !strings.Contains(log, "job "+id+": hold ") || !strings.Contains(log, " on card(s) 0: ") {
			t.Errorf("job named %q: want a hold on card 0 alone; log:\n%s", tc.name, log)
		}
		// The text the Prolog once read does carry the fake GRES.
		if r := c.slurm(t, "scontrol", "show", "job", "-d", id); !strings.Contains(r.stdout, "JobName="+tc.name) {
			t.Errorf("scontrol show job -d does not show the name as given: %v", r)
		}
		b.release(t, "slurm")
		exit := c.waitJob(t, id, time.Minute, "COMPLETED", "FAILED")
		if out := readFile(filepath.Join(b.dir, id+".out")); exit != "0:0" || !strings.Contains(out, "TT_QUEUE_DEVICE=0 TT_VISIBLE_DEVICES="+card0+"\n") {
			t.Errorf("job named %q: exit %s, output %q; want card 0 alone", tc.name, exit, out)
		}
		c.logHas(t, 30*time.Second, "epilog", "job "+id+":", "released hold(s) of the job")
		log := readFile(c.ttLog)
		if !strings.Contains(log, "job "+id+": reset of card 0 queued") || strings.Contains(log, "job "+id+": reset of card 1") {
			t.Errorf("job named %q: the Epilog's resets, want card 0's alone; log:\n%s", tc.name, log)
		}
		var got []string
		eventually(t, time.Minute, "the reset of card 0 runs", func() (bool, string) {
			got = resetLines(c.q)[before:]
			return len(got) >= 1, strings.Join(got, "|")
		})
		if strings.Join(got, "|") != "reset 0" {
			t.Errorf("job named %q: resets run %q, want card 0's alone", tc.name, got)
		}
	}
}
