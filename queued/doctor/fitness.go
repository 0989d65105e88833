package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ttkit/ttkit/internal/ttsysfs"
	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/config"
	"github.com/ttkit/ttkit/queued/defaults"
)

// Fitness is how queued's gate and recovery are configured, as the gate
// check reports them (docs/fitness.md): an operator reads in one line
// what queued does before each job and when a card turns unfit.
type Fitness struct {
	// GateInterval is how often each card's sampler reads its node,
	// sysfs entry and heartbeat (TT_DEVICE_GATE_INTERVAL).
	GateInterval time.Duration
	// GateCmd and GateTimeout are the site probe (TT_DEVICE_GATE_CMD).
	GateCmd     string
	GateTimeout time.Duration
	// RecoveryCooldown is the least time between two automatic
	// recoveries of a card (TT_DEVICE_RECOVERY_COOLDOWN); 0 is none.
	RecoveryCooldown time.Duration
	// ResetTimeout and HealthCheckTimeout bound the first rung.
	ResetTimeout, HealthCheckTimeout time.Duration
	// DeepResetCmd and DeepResetTimeout are the second rung; "" is none.
	DeepResetCmd     string
	DeepResetTimeout time.Duration
	// RecoveryRungs are the site's rungs after the deep reset
	// (TT_DEVICE_RECOVERY_CMDS); a rung's zero timeout is the deep
	// reset's.
	RecoveryRungs []config.RecoveryRung
	// RecoveryMaxPerHour bounds queued's own ladders of one card in any
	// hour (TT_DEVICE_RECOVERY_MAX_PER_HOUR).
	RecoveryMaxPerHour int
}

// DefaultFitness is queued's defaults.
func DefaultFitness() Fitness {
	return Fitness{GateInterval: defaults.GateIntervalSeconds * time.Second, GateTimeout: defaults.GateTimeoutSeconds * time.Second,
		RecoveryCooldown:   defaults.RecoveryCooldownSeconds * time.Second,
		ResetTimeout:       defaults.ResetTimeoutSeconds * time.Second,
		HealthCheckTimeout: defaults.HealthCheckTimeoutSeconds * time.Second,
		DeepResetTimeout:   defaults.DeepResetTimeoutSeconds * time.Second,
		RecoveryMaxPerHour: defaults.RecoveryMaxPerHour}
}

// FitnessOf is cfg's gate and recovery settings: the one place that
// reads them for doctor. cfg was checked when it was read, so its rungs
// parse; should they not, doctor shows none rather than failing.
func FitnessOf(cfg config.Config) Fitness {
	rungs, _ := config.ParseRecoveryCmds(cfg.RecoveryCmds)
	return Fitness{GateInterval: cfg.GateInterval, GateCmd: cfg.GateCmd, GateTimeout: cfg.GateTimeout,
		RecoveryCooldown: cfg.RecoveryCooldown, ResetTimeout: cfg.ResetTimeout, HealthCheckTimeout: cfg.HealthCheckTimeout,
		DeepResetCmd: cfg.DeepResetCmd, DeepResetTimeout: cfg.DeepResetTimeout,
		RecoveryRungs: rungs, RecoveryMaxPerHour: cfg.RecoveryMaxPerHour}
}

// checkGate reports the gate and the recovery as configured. It warns
// when queued never recovers an unfit card by itself: its jobs then wait
// until someone resets it.
func checkGate(h Host) Check {
	f := h.Fitness
	parts := []string{fmt.Sprintf("sampler every %s (TT_DEVICE_GATE_INTERVAL)", f.GateInterval)}
	if f.GateCmd == "" {
		parts = append(parts, "no site probe (TT_DEVICE_GATE_CMD)")
	} else {
		parts = append(parts, fmt.Sprintf("site probe `%s` within %s at start and after a job that ended badly", f.GateCmd, f.GateTimeout))
	}
	ladder := fmt.Sprintf("recovery: reset then health check (within %s and %s)", f.ResetTimeout, f.HealthCheckTimeout)
	if f.DeepResetCmd == "" {
		ladder += ", no deep reset (TT_DEVICE_DEEP_RESET_CMD)"
	} else {
		ladder += fmt.Sprintf(", then the deep reset `%s` within %s", f.DeepResetCmd, f.DeepResetTimeout)
	}
	if len(f.RecoveryRungs) == 0 {
		ladder += ", no site rungs (TT_DEVICE_RECOVERY_CMDS)"
	}
	for i, r := range f.RecoveryRungs {
		timeout := r.Timeout
		if timeout <= 0 {
			timeout = f.DeepResetTimeout
		}
		ladder += fmt.Sprintf(", then site rung %d `%s` within %s", i+1, r.Cmd, timeout)
	}
	ladder += "; each rung verified by the health check and the gate"
	parts = append(parts, ladder)
	c := Check{Name: "gate", Status: OK}
	if f.RecoveryCooldown <= 0 {
		parts = append(parts, "no automatic recovery: an unfit card's jobs wait until someone resets it")
		c.Status, c.Fix = Warn, "set TT_DEVICE_RECOVERY_COOLDOWN to the seconds between two automatic recoveries of a card (300 by default)"
	} else {
		parts = append(parts, fmt.Sprintf("automatic recovery at most once per %s (TT_DEVICE_RECOVERY_COOLDOWN), at most %d automatic ladders a card an hour (TT_DEVICE_RECOVERY_MAX_PER_HOUR)",
			f.RecoveryCooldown, f.RecoveryMaxPerHour))
	}
	c.Detail = strings.Join(parts, "; ")
	return c
}

// checkCardFitness reports what the driver offers the gate for each card
// queued serves (every device node when none are named): the node, the
// sysfs entry and a tt_heartbeat that moves between two reads 0.6 s
// apart, and queued's own verdict when it answered. A missing node or
// entry, a stalled heartbeat, or a card queued holds unfit or dead fails;
// no heartbeat attribute warns (the gate cannot see a hung firmware).
func checkCardFitness(h Host, status *api.Status) Check {
	c := Check{Name: "card-fitness"}
	cards := h.Cards
	if cards == nil {
		cards, _ = numericEntries(h.DevDir, false)
	}
	if len(cards) == 0 {
		c.Status, c.Detail = Skip, "no card to look at (see device-nodes)"
		return c
	}
	_, devErr := os.Stat(h.DevDir)
	first := map[int]ttsysfs.Presence{}
	var errs []string
	for _, n := range cards {
		p, err := ttsysfs.ReadPresence(h.SysfsPath, n)
		if err != nil {
			errs = append(errs, err.Error())
		}
		first[n] = p
	}
	time.Sleep(600 * time.Millisecond) // the gate's two heartbeat reads are 0.5 s apart at least
	var lines, fixes []string
	worst := OK
	worse := func(s Status) {
		if s == Fail || worst == OK {
			worst = s
		}
	}
	noClass := false
	for _, n := range cards {
		node := filepath.Join(h.DevDir, strconv.Itoa(n))
		p0 := first[n]
		p, _ := ttsysfs.ReadPresence(h.SysfsPath, n)
		card := "card " + strconv.Itoa(n) + ": "
		_, nodeErr := os.Stat(node)
		switch {
		case nodeErr != nil && devErr == nil:
			lines = append(lines, card+"device node "+node+" is missing")
			worse(Fail)
			fixes = append(fixes, fmt.Sprintf("card %d: the driver lost it; `tt-device-queue reset --device %d`, and reboot the host if it stays gone", n, n))
			continue
		case !p.Class:
			noClass = true
			lines = append(lines, card+"node")
			continue
		case !p.Entry:
			lines = append(lines, fmt.Sprintf("%sno sysfs entry tenstorrent!%d", card, n))
			worse(Fail)
			fixes = append(fixes, fmt.Sprintf("card %d: the driver does not see it; `tt-device-queue reset --device %d`, and reboot the host if it stays gone", n, n))
			continue
		case !p.Heartbeat.OK:
			lines = append(lines, card+"node, sysfs entry, no tt_heartbeat")
			worse(Warn)
			fixes = append(fixes, "the driver offers no tt_heartbeat: the gate cannot see a hung firmware; set TT_DEVICE_GATE_CMD to a probe such as `tt-smi -s` (docs/fitness.md)")
			continue
		case p0.Heartbeat.OK && p0.Heartbeat.Value == p.Heartbeat.Value:
			lines = append(lines, fmt.Sprintf("%sheartbeat stalled at %d: the firmware is hung and the gate holds the card's jobs", card, p.Heartbeat.Value))
			worse(Fail)
			fixes = append(fixes, fmt.Sprintf("card %d: `tt-device-queue reset --device %d` (queued starts it by itself unless TT_DEVICE_RECOVERY_COOLDOWN is 0)", n, n))
			continue
		}
		lines = append(lines, card+"node, sysfs entry, heartbeat moving")
	}
	if noClass {
		lines = append(lines, fmt.Sprintf("no class/tenstorrent under %s: the driver offers no sysfs entries, so the gate judges the device nodes only", h.SysfsPath))
		worse(Warn)
		fixes = append(fixes, "pass /sys through (a container), or use a tt-kmd that creates /sys/class/tenstorrent; set TT_DEVICE_SYSFS_PATH where sysfs is elsewhere")
	}
	if status != nil {
		for _, v := range status.Cards {
			if v.State == "unfit" || v.State == "dead" {
				lines = append(lines, fmt.Sprintf("queued holds card %s: %s: %s", v.DeviceID, v.State, v.Reason))
				worse(Fail)
			}
		}
	}
	lines = append(lines, errs...)
	c.Status, c.Detail, c.Fix = worst, strings.Join(lines, "; "), strings.Join(fixes, "; ")
	return c
}
