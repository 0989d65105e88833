package doctor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/config"
	"github.com/ttkit/ttkit/queued/doctor"
	"github.com/ttkit/ttkit/queued/doctor/doctortest"
)

// The gate check reports how queued's gate and recovery are configured:
// the sampler's interval, the site probe and its timeout, the recovery
// cooldown, the reset and deep reset (docs/fitness.md).
func TestGateCheck_SaysWhatIsConfigured(t *testing.T) {
	_, h := healthy(t)
	c := byName(t, doctor.Run(context.Background(), h), "gate")
	if c.Status != doctor.OK {
		t.Fatalf("gate = %+v", c)
	}
	for _, w := range []string{"sampler every 5s", "no site probe (TT_DEVICE_GATE_CMD)", "automatic recovery at most once per 5m0s",
		"reset then health check", "no deep reset (TT_DEVICE_DEEP_RESET_CMD)", "no site rungs (TT_DEVICE_RECOVERY_CMDS)",
		"at most 3 automatic ladders a card an hour (TT_DEVICE_RECOVERY_MAX_PER_HOUR)", "each rung verified by the health check and the gate"} {
		if !strings.Contains(c.Detail, w) {
			t.Errorf("gate detail lacks %q: %s", w, c.Detail)
		}
	}
	_, h = healthy(t)
	h.Fitness = doctor.Fitness{GateInterval: 2 * time.Second, GateCmd: "tt-smi -s {device}", GateTimeout: 30 * time.Second,
		RecoveryCooldown: time.Minute, DeepResetCmd: "bmc-cycle {device}", DeepResetTimeout: 600 * time.Second,
		RecoveryRungs: []config.RecoveryRung{{Cmd: "ipmi-cycle {device}", Timeout: 900 * time.Second}, {Cmd: "pcie-rescan {device}"}}, RecoveryMaxPerHour: 5}
	c = byName(t, doctor.Run(context.Background(), h), "gate")
	for _, w := range []string{"sampler every 2s", "site probe `tt-smi -s {device}` within 30s", "at most once per 1m0s",
		"deep reset `bmc-cycle {device}` within 10m0s", "site rung 1 `ipmi-cycle {device}` within 15m0s",
		"site rung 2 `pcie-rescan {device}` within 10m0s", "at most 5 automatic ladders a card an hour"} {
		if !strings.Contains(c.Detail, w) {
			t.Errorf("gate detail lacks %q: %s", w, c.Detail)
		}
	}
	_, h = healthy(t)
	h.Fitness.RecoveryCooldown = 0
	if c = byName(t, doctor.Run(context.Background(), h), "gate"); c.Status != doctor.Warn || !strings.Contains(c.Detail, "no automatic recovery") ||
		!strings.Contains(c.Fix, "TT_DEVICE_RECOVERY_COOLDOWN") {
		t.Errorf("gate without automatic recovery = %+v", c)
	}
}

// The card-fitness check reports what the driver offers the gate for each
// card: its device node, its sysfs entry, a tt_heartbeat that moves.
// A missing node or entry, or a stalled heartbeat, fails (the gate holds
// the card); an absent heartbeat warns (the gate judges less).
func TestCardFitnessCheck(t *testing.T) {
	_, h := healthy(t)
	c := byName(t, doctor.Run(context.Background(), h), "card-fitness")
	if c.Status != doctor.OK || !strings.Contains(c.Detail, "card 0: node, sysfs entry, heartbeat moving") ||
		!strings.Contains(c.Detail, "card 1: node, sysfs entry, heartbeat moving") {
		t.Fatalf("card-fitness on a healthy host = %+v", c)
	}
	for _, tc := range []struct {
		name   string
		break_ func(r *doctortest.Root, h *doctor.Host)
		want   doctor.Status
		words  []string
	}{
		{"no heartbeat attribute", func(r *doctortest.Root, h *doctor.Host) { r.StopBeat(1); r.Sysfs.Remove(1, "tt_heartbeat") },
			doctor.Warn, []string{"card 1: node, sysfs entry, no tt_heartbeat", "TT_DEVICE_GATE_CMD"}},
		{"stalled heartbeat", func(r *doctortest.Root, h *doctor.Host) { r.StopBeat(1) },
			doctor.Fail, []string{"card 1: heartbeat stalled at ", "tt-device-queue reset --device 1"}},
		{"node gone", func(r *doctortest.Root, h *doctor.Host) { r.Remove("/dev/tenstorrent/1") },
			doctor.Fail, []string{"card 1: device node ", "/dev/tenstorrent/1 is missing"}},
		{"sysfs entry gone", func(r *doctortest.Root, h *doctor.Host) { r.Remove("/sys/class/tenstorrent/tenstorrent!0") },
			doctor.Fail, []string{"card 0: no sysfs entry tenstorrent!0"}},
		{"no sysfs class", func(r *doctortest.Root, h *doctor.Host) { r.Remove("/sys/class/tenstorrent") },
			doctor.Warn, []string{"card 0: node; card 1: node; no class/tenstorrent under ", "/sys: the driver offers no sysfs entries", "judges the device nodes only"}},
		{"queued holds an unfit card", func(r *doctortest.Root, h *doctor.Host) {
			q := h.Queued
			h.Queued = func(ctx context.Context) (api.Status, error) {
				s, err := q(ctx)
				s.Cards[1].State, s.Cards[1].Reason = "unfit", "gate command exited 3: eth link down"
				return s, err
			}
		}, doctor.Fail, []string{"queued holds card 1: unfit: gate command exited 3: eth link down"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, h := healthy(t)
			tc.break_(r, &h)
			c := byName(t, doctor.Run(context.Background(), h), "card-fitness")
			if c.Status != tc.want {
				t.Errorf("card-fitness = %+v, want %s", c, tc.want)
			}
			for _, w := range tc.words {
				if !strings.Contains(c.Detail+" fix: "+c.Fix, w) {
					t.Errorf("card-fitness lacks %q: %+v", w, c)
				}
			}
		})
	}
}
