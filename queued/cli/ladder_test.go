package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/queued/api"
)

// waitCardStatus polls `--json status` until card n satisfies cond.
func waitCardStatus(t *testing.T, d *daemon, n int, what string, cond func(api.CardStatus) bool) api.CardStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st api.Status
		decode(t, d.run("--json", "status"), &st)
		if cond(st.Cards[n]) {
			return st.Cards[n]
		}
		if time.Now().After(deadline) {
			t.Fatalf("card %d never %s: %+v", n, what, st.Cards[n])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A user's reset climbs the whole ladder (docs/fitness.md, "The recovery
// ladder") on a card whose heartbeat no rung brings back: the reset and
// the deep reset exit 0, the site rung too, and none counts; the rung
// running shows in `status`; the card ends dead with each rung's evidence
// in `job` and `--json job`, and the reset's log; the other card runs on.
func TestReset_LadderRecordsEveryRung(t *testing.T) {
	t.Parallel()
	sysfs := kmdtest.BusySysfs(t, t.TempDir(), 2)
	sysfs.Beat(50*time.Millisecond, 0) // card 1 stands still
	open := filepath.Join(t.TempDir(), "open")
	d := startDaemon(t, "TT_DEVICE_SYSFS_PATH="+sysfs.Root, "TT_DEVICE_GATE_INTERVAL=1", "TT_DEVICE_RECOVERY_COOLDOWN=0",
		"TT_DEVICE_RESET_CMD=echo reset", "TT_DEVICE_DEEP_RESET_CMD=while [ ! -e "+open+" ]; do sleep 0.05; done; echo deep {device}",
		"TT_DEVICE_RECOVERY_CMDS=30:echo site rung on {device}")
	waitCardStatus(t, d, 1, "unfit", func(c api.CardStatus) bool { return c.State == "unfit" })
	var res api.ResetResponse
	decode(t, d.run("--json", "reset", "--device", "1"), &res)
	id := res.Resets[0].ResetJobID
	c := waitCardStatus(t, d, 1, "on the deep reset", func(c api.CardStatus) bool { return c.Rung == "deep reset (2/3)" })
	if c.State != "recovering" {
		t.Fatalf("card 1 on a rung is %s", c.State)
	}
	d.run("status").want(t, 0, []string{"card 1: recovery ladder on the deep reset (2/3)"}, nil)
	if err := os.WriteFile(open, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	j := d.waitState(id, "done")
	for _, want := range []string{"card 1 is dead: every rung failed: ", "reset exited 0, health check passed, gate: heartbeat stalled since ",
		"; deep reset exited 0, health check passed, gate: heartbeat stalled since ", "; site rung 1 exited 0, health check passed, gate: heartbeat stalled since "} {
		if !strings.Contains(j.Error, want) {
			t.Fatalf("--json job's error %q lacks %q", j.Error, want)
		}
	}
	d.run("job", id).want(t, 0, []string{"every rung failed", "site rung 1 exited 0"}, nil)
	d.run("logs", id).want(t, 0, []string{"== rung 1/3: reset", "== rung 2/3: deep reset", "deep 1", "== rung 3/3: site rung 1", "site rung on 1",
		"== gate on card 1 after the site rung 1: heartbeat stalled since", "== card 1 is dead: every rung failed"}, nil)
	waitCardStatus(t, d, 1, "dead", func(c api.CardStatus) bool { return c.State == "dead" && c.Rung == "" })
	other := strings.TrimSpace(d.run("queue", "--device", "0", "--", "true").stdout)
	d.waitState(other, "done")
}
