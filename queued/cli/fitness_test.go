package cli_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/queued/api"
)

// A card whose firmware heartbeat stands still is unfit in `--json
// status` (state and reason) and in `status`; its job stays queued while
// the other card runs its own, and starts once the heartbeat moves.
func TestStatus_UnfitCardHoldsItsJob(t *testing.T) {
	t.Parallel()
	sysfs := kmdtest.BusySysfs(t, t.TempDir(), 2)
	beat := sysfs.Beat(50*time.Millisecond, 0, 1)
	beat.Stall(1, true)
	// No automatic recovery: its ladder would find the heartbeat still
	// stalled and make the card dead (see TestReset_LadderRecordsEveryRung);
	// this test is about the hold.
	d := startDaemon(t, "TT_DEVICE_SYSFS_PATH="+sysfs.Root, "TT_DEVICE_GATE_INTERVAL=1", "TT_DEVICE_RECOVERY_COOLDOWN=0")
	var st api.Status
	deadline := time.Now().Add(20 * time.Second)
	for {
		st = api.Status{}
		decode(t, d.run("--json", "status"), &st)
		if st.Cards[1].State == "unfit" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("card 1 never unfit: %+v", st.Cards[1])
		}
		time.Sleep(50 * time.Millisecond)
	}
	if c := st.Cards[1]; !strings.HasPrefix(c.Reason, "heartbeat stalled since ") || c.UnfitSince == nil {
		t.Fatalf("card 1 in --json status: state %s, reason %q, since %v", c.State, c.Reason, c.UnfitSince)
	}
	if c := st.Cards[0]; c.State != "healthy" || c.Reason != "" {
		t.Fatalf("card 0 in --json status: state %s, reason %q", c.State, c.Reason)
	}
	held := strings.TrimSpace(d.run("queue", "--device", "1", "--", "echo ran").stdout)
	other := strings.TrimSpace(d.run("queue", "--device", "0", "--", "true").stdout)
	d.waitState(other, "done")
	if j := d.job(held); j.State != "queued" {
		t.Fatalf("the unfit card's job is %s; want queued", j.State)
	}
	d.run("status").want(t, 0, []string{"card 1: unfit since", "heartbeat stalled since", "its jobs stay queued until the gate passes again"}, nil)
	beat.Stall(1, false)
	d.waitState(held, "done")
}
