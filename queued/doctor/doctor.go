// Package doctor checks a host for both of ttkit's products before their
// first real run: the KMD and its cards (otelcol-tt and queued both read
// them), the reset and health-check commands queued runs, how /proc is
// mounted and which PID namespace this shell is in (otelcol-tt names
// holders by PID), and queued itself (answering, token, store, disk, user
// unit). Each check says what it found and, when something is wrong, the
// command or setting that fixes it.
//
// Every path a check reads is a field of Host, so tests run the checks on
// fake trees and a container can check the host's tree mounted elsewhere.
package doctor

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/defaults"
)

// Status is a check's verdict.
type Status string

// The verdicts, from best to worst; Skip means the check could not run
// because something it needs failed or is absent (its Detail says what).
const (
	OK   Status = "ok"
	Warn Status = "warn"
	Fail Status = "fail"
	Skip Status = "skip"
)

// Check is one check's result, as `tt-device-queue doctor --json` prints it.
type Check struct {
	// Name is stable, so scripts can pick a check out of the JSON.
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Detail says what was found.
	Detail string `json:"detail"`
	// Fix says how to make the check pass; empty when it passes.
	Fix string `json:"fix,omitempty"`
}

// Host is what the checks look at. Paths are absolute; Default fills the
// real ones.
type Host struct {
	// DriverPath is the KMD's procfs directory (TT_DEVICE_DRIVER_PATH).
	DriverPath string
	// VersionFile holds the loaded KMD's version.
	VersionFile string
	// DevDir holds one device node per card.
	DevDir string
	// MountInfo is this process's mount table (for /proc's hidepid).
	MountInfo string
	// InitPIDNS and SelfPIDNS are the PID namespace links of PID 1 and of
	// this process; SelfStatus is this process's status file, whose NSpid
	// line answers when PID 1's link cannot be read (not root).
	InitPIDNS, SelfPIDNS, SelfStatus string

	// Cards are the cards queued serves and CardsFrom says where that
	// list came from ("queued", "TT_DEVICE_IDS"); nil Cards means every
	// device node (queued's own default).
	Cards     []int
	CardsFrom string

	// ResetCmd and HealthCheckCmd are queued's commands ({device} not yet
	// replaced); Home expands a leading ~/ in them as bash would.
	ResetCmd, HealthCheckCmd string
	Home                     string
	// CommandTimeout bounds each program a check runs.
	CommandTimeout time.Duration

	// StateDir is queued's state directory; StateDirErr why it is unknown.
	StateDir    string
	StateDirErr error
	// Queued asks the daemon for its status; nil when there is no way to.
	Queued func(ctx context.Context) (api.Status, error)
	// QueuedAt names where Queued asks, for messages.
	QueuedAt string
	// MinFree and WarnFree are free-byte floors for the state directory's
	// file system: below MinFree the check fails, below WarnFree it warns.
	MinFree, WarnFree uint64

	// UnitDir is the systemd user unit directory (~/.config/systemd/user).
	UnitDir string

	// SysfsPath is where sysfs is mounted (TT_DEVICE_SYSFS_PATH), and
	// Fitness queued's gate and recovery settings (DefaultFitness until
	// the caller fills them).
	SysfsPath string
	Fitness   Fitness

	// Enforce says TT_DEVICE_ENFORCE=acl is set, and UdevRule is where
	// make install-system ENFORCE=1 puts the rule that makes the nodes
	// root's alone (DefaultUdevRule).
	Enforce  bool
	UdevRule string
}

// Default is the real host's paths under root ("/" or where the host's
// root is mounted), with the settings still to be filled by the caller.
func Default(root string) Host {
	p := func(s string) string { return strings.TrimSuffix(root, "/") + s }
	return Host{
		DriverPath:     p(defaults.DriverPath),
		VersionFile:    p("/sys/module/tenstorrent/version"),
		DevDir:         p(defaults.DevDir),
		MountInfo:      p("/proc/self/mountinfo"),
		InitPIDNS:      p("/proc/1/ns/pid"),
		SelfPIDNS:      p("/proc/self/ns/pid"),
		SelfStatus:     p("/proc/self/status"),
		SysfsPath:      p("/sys"),
		UdevRule:       p(DefaultUdevRule),
		Fitness:        DefaultFitness(),
		CommandTimeout: 20 * time.Second,
		MinFree:        100 << 20,
		WarnFree:       1 << 30,
	}
}

// Run runs every check in order. A check that needs an earlier one's
// answer (the KMD's version needs the KMD) reports Skip when that failed.
// Which checks apply is the mode's to say: a check a mode does not apply
// to (see checks) is skipped with the reason.
func Run(ctx context.Context, h Host) []Check {
	r := &run{h: h}
	if h.Queued != nil {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		s, err := h.Queued(qctx)
		cancel()
		if err == nil {
			r.status = &s
			// What the running queued serves beats what the settings say.
			r.h.Cards, r.h.CardsFrom = statusCards(s), "queued"
		}
		r.statusErr = err
	}
	mode := api.UserMode
	if r.status != nil {
		mode = modeOf(*r.status)
	}
	out := make([]Check, 0, len(checks))
	for _, c := range checks {
		if why, ok := c.skip[mode]; ok {
			out = append(out, Check{Name: c.name, Status: Skip, Detail: mode.String() + " mode: " + why})
			continue
		}
		out = append(out, c.run(ctx, r))
	}
	return out
}

// run is what the checks of one Run share: the host, the queued that
// answered (if one did) and whether the KMD is loaded.
type run struct {
	h         Host
	status    *api.Status
	statusErr error
	kmdLoaded bool
	umd       bool // the health check's Python imports tt_umd
}

// check is one of Run's checks, in the order they run and print.
type check struct {
	name string
	run  func(ctx context.Context, r *run) Check
	// skip holds, for each mode the check does not apply to, why not;
	// a mode that is not in it runs the check.
	skip map[api.Mode]string
}

// checks are Run's checks. A system-mode queued is root's: its state,
// resets and unit are not this user's to check from here.
var checks = []check{
	{name: "kmd", run: func(_ context.Context, r *run) Check {
		c := checkKMD(r.h)
		r.kmdLoaded = c.Status == OK
		return c
	}},
	{name: "kmd-version", run: func(_ context.Context, r *run) Check { return checkKMDVersion(r.h, r.kmdLoaded) }},
	{name: "device-nodes", run: func(_ context.Context, r *run) Check { return checkNodes(r.h, r.kmdLoaded) }},
	{name: "reset-command", run: func(ctx context.Context, r *run) Check { return checkReset(ctx, r.h) },
		skip: map[api.Mode]string{api.SystemMode: "resets run as root (or TT_DEVICE_RESET_USER); run doctor as that user to check the command"}},
	{name: "health-check", run: func(ctx context.Context, r *run) Check {
		c := checkHealth(ctx, r.h)
		r.umd = c.Status == OK
		return c
	},
		skip: map[api.Mode]string{api.SystemMode: "health checks run as root (or TT_DEVICE_RESET_USER); run doctor as that user to check it"}},
	{name: "proc-hidepid", run: func(_ context.Context, r *run) Check { return checkHidepid(r.h) }},
	{name: "pid-namespace", run: func(_ context.Context, r *run) Check { return checkPIDNamespace(r.h) }},
	{name: "queued", run: func(_ context.Context, r *run) Check { return checkQueued(r.h, r.status, r.statusErr) }},
	{name: "job-tracking", run: func(_ context.Context, r *run) Check { return checkJobTracking(r.status) }},
	{name: "cards", run: func(_ context.Context, r *run) Check { return checkCards(r.status, r.umd, r.h.DevDir) }},
	{name: "enforcement", run: func(_ context.Context, r *run) Check { return checkEnforcement(r.h, r.status) }},
	{name: "gate", run: func(_ context.Context, r *run) Check { return checkGate(r.h) }},
	{name: "card-fitness", run: func(_ context.Context, r *run) Check { return checkCardFitness(r.h, r.status) }},
	{name: "token", run: func(_ context.Context, r *run) Check { return checkToken(r.h) },
		skip: map[api.Mode]string{api.SystemMode: "no token is used on the system socket: the kernel tells queued who you are"}},
	{name: "store", run: func(_ context.Context, r *run) Check { return checkStore(r.h) },
		skip: map[api.Mode]string{api.SystemMode: "queued's store is root's (systemctl status queued-system; journalctl -u queued-system)"}},
	{name: "disk", run: func(_ context.Context, r *run) Check { return checkDisk(r.h) },
		skip: map[api.Mode]string{api.SystemMode: "queued's state is root's; tt-device-queue status warns when its store cannot be written"}},
	{name: "user-unit", run: func(_ context.Context, r *run) Check { return checkUnit(r.h) },
		skip: map[api.Mode]string{api.SystemMode: "queued runs as the system unit queued-system.service, not as your user unit"}},
}

// modeOf is the mode a queued's status reports; a mode this doctor does
// not know is taken for user mode, whose checks all run.
func modeOf(s api.Status) api.Mode {
	m, err := api.ParseMode(string(s.Mode))
	if err != nil {
		return api.UserMode
	}
	return m
}

// Failed reports whether any check failed.
func Failed(checks []Check) bool {
	for _, c := range checks {
		if c.Status == Fail {
			return true
		}
	}
	return false
}

// WriteText prints checks for a person: one line per check, its fix
// indented under it, and a count of each verdict.
func WriteText(w io.Writer, checks []Check) error {
	width := 0
	for _, c := range checks {
		width = max(width, len(c.Name))
	}
	counts := map[Status]int{}
	var b strings.Builder
	for _, c := range checks {
		counts[c.Status]++
		fmt.Fprintf(&b, "%-4s  %-*s  %s\n", c.Status, width, c.Name, c.Detail)
		if c.Fix != "" {
			fmt.Fprintf(&b, "%-4s  %-*s  fix: %s\n", "", width, "", c.Fix)
		}
	}
	fmt.Fprintf(&b, "\n%d ok, %d warnings, %d failed, %d skipped\n", counts[OK], counts[Warn], counts[Fail], counts[Skip])
	_, err := io.WriteString(w, b.String())
	return err
}

func statusCards(s api.Status) []int {
	cards := make([]int, 0, len(s.Cards))
	for _, c := range s.Cards {
		var n int
		if _, err := fmt.Sscanf(c.DeviceID, "%d", &n); err == nil {
			cards = append(cards, n)
		}
	}
	return cards
}
