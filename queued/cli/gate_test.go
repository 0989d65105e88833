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

// `gate` runs the gate now, the site probe included, and says whether each
// card is fit (exit 0) or not (exit 3, the card and the reason named);
// `--wait` waits for an unfit card until it passes, turns dead or the wait
// runs out; an unfit card found so is recovered by queued by itself. The
// Slurm Prolog and Epilog are built on it (docs/slurm.md).
func TestGate_SaysWhetherEachCardIsFit(t *testing.T) {
	t.Parallel()
	sysfs := kmdtest.BusySysfs(t, t.TempDir(), 2)
	beat := sysfs.Beat(50*time.Millisecond, 0, 1)
	beat.Stall(1, true)
	dir := t.TempDir()
	probe := filepath.Join(dir, "probe.sh")
	health := filepath.Join(dir, "health.sh")
	reset := filepath.Join(dir, "reset.sh") // mends what the probe finds
	for path, body := range map[string]string{
		reset:  "#!/bin/sh\nrm -f " + dir + "/probe-fail-$1\n",
		probe:  "#!/bin/sh\nif [ -e " + dir + "/probe-fail-$1 ]; then echo \"ethernet down on $1\"; exit 1; fi\n",
		health: "#!/bin/sh\n[ ! -e " + dir + "/health-fail-$1 ]\n",
	} {
		if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// No automatic recovery here: an exhausted ladder would make the
	// stalled card 1 dead (docs/fitness.md), and the answers below are
	// about an unfit card. The recovery is the second daemon's, below.
	d := startDaemon(t, "TT_DEVICE_SYSFS_PATH="+sysfs.Root, "TT_DEVICE_GATE_INTERVAL=1", "TT_DEVICE_RECOVERY_COOLDOWN=0",
		"TT_DEVICE_GATE_CMD="+probe+" {device}", "TT_DEVICE_HEALTH_CHECK_CMD="+health+" {device}")
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st api.Status
		decode(t, d.run("--json", "status"), &st)
		if c := st.Cards[1]; c.State == "unfit" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("card 1 never unfit: %+v", st.Cards[1])
		}
		time.Sleep(50 * time.Millisecond)
	}

	d.run("gate", "--device", "0").want(t, 0, []string{"card 0: fit"}, nil)
	d.run("gate", "--device", "1").want(t, 3, nil, []string{"card 1 is unfit: heartbeat stalled since"})
	var res api.GateResponse
	r := d.run("--json", "gate", "--device", "0,1")
	if r.code != 3 {
		t.Fatalf("--json gate of a fit and an unfit card: %v", r)
	}
	decode(t, result{stdout: r.stdout}, &res)
	if len(res.Cards) != 2 || res.Cards[0].DeviceID != "0" || res.Cards[0].State != "healthy" || !res.Cards[0].Fit ||
		res.Cards[1].State != "unfit" || res.Cards[1].Fit || !strings.HasPrefix(res.Cards[1].Reason, "heartbeat stalled since") {
		t.Fatalf("--json gate = %+v", res)
	}
	// Still stalled: still unfit once the wait runs out.
	d.run("gate", "--device", "1", "--wait", "2s").want(t, 3, nil, []string{"card 1 is still unfit after 2s: heartbeat stalled since"})
	d.run("gate", "--device", "7").want(t, 1, nil, []string{"no card 7"})
	d.run("gate").want(t, 2, nil, []string{"--device"})

	// The site probe runs in the gate: failing, the card is unfit with
	// its last line, and queued recovers the card by itself.
	beat.Stall(1, false)
	d = startDaemon(t, "TT_DEVICE_SYSFS_PATH="+sysfs.Root, "TT_DEVICE_GATE_INTERVAL=1", "TT_DEVICE_RESET_CMD="+reset+" {device} #",
		"TT_DEVICE_GATE_CMD="+probe+" {device}", "TT_DEVICE_HEALTH_CHECK_CMD="+health+" {device}")
	if err := os.WriteFile(filepath.Join(dir, "probe-fail-0"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// (unfit, or already recovering: queued starts the ladder at once)
	d.run("gate", "--device", "0").want(t, 3, nil, []string{"card 0 is ", ": gate command exited 1: ethernet down on 0"})
	for deadline := time.Now().Add(30 * time.Second); ; {
		var st api.Status
		decode(t, d.run("--json", "status"), &st)
		if lr := st.Cards[0].LastReset; lr != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery of card 0: %+v", st.Cards[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Its reset mended it: the ladder's verification ran the probe.
	d.run("gate", "--device", "0", "--wait", "60s").want(t, 0, []string{"card 0: fit"}, nil)

	// A card that fails recovery is dead: the wait ends at once.
	if err := os.WriteFile(filepath.Join(dir, "health-fail-1"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	d.run("reset", "--device", "1").want(t, 0, nil, nil)
	d.run("gate", "--device", "1", "--wait", "120s").want(t, 3, nil, []string{"card 1 is dead: "})
}
