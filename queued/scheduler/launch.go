package scheduler

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ttkit/ttkit/internal/ttsysfs"
	"github.com/ttkit/ttkit/queued/account"
	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
)

// launcher decides how a job or a reset runs: as whom, where, in what
// environment, with which limits. It reads only what New gave it.
type launcher struct {
	opt    *Options
	env    []string // BaseEnv without the variables the queue sets
	ctlEnv []string // what of env reset and health commands get; see controlEnv
}

// ErrNoOwner refuses to start a job in system mode whose record names no
// user to run it as (one recorded before owners were): it never runs as
// root.
var ErrNoOwner = errors.New("the job has no recorded owner, and system mode runs every job as its owner")

// ErrOwnerChanged refuses a job whose owner's uid now names another user.
var ErrOwnerChanged = errors.New("the job's owner is gone")

// spec is how rec runs: as whom, where, in what environment. In system mode,
// a job runs as its owner, looked up now, and an owner that cannot be
// found is an error (the job fails without starting); a reset runs as
// ResetAccount when one is set. Resets and health checks get the minimal
// environment of controlEnv, never the whole of queued's. In system mode
// everything gets a session keyring of its own, so nothing shares
// queued's (root's).
func (s *launcher) spec(rec *store.Job) (runner.Spec, error) {
	spec := runner.Spec{
		Shell:     s.opt.Shell,
		Cmd:       rec.Cmd,
		Dir:       rec.Cwd,
		Timeout:   time.Duration(rec.Timeout) * time.Second,
		Repeat:    rec.Repeat,
		KillGrace: s.opt.KillGrace,
		TermGrace: s.opt.TermGrace,
		Keyring:   s.opt.Mode.System(),
	}
	if rec.Kind == store.KindJob {
		spec.TasksMax = s.opt.JobTasksMax
		spec.OOMScoreAdj = s.opt.JobOOMScoreAdj
		spec.Notes = true
		spec.IdleTimeout = time.Duration(rec.IdleTimeout) * time.Second
		// Its end commits while its leftovers are swept; the card's
		// next program waits for the sweep (core.waitSettled).
		spec.SettleLater = true
	}
	base := s.env
	switch {
	case rec.Kind == store.KindReset && s.opt.ResetAccount != nil:
		spec.Account = s.opt.ResetAccount
		base = overrideEnv(s.ctlEnv, s.opt.ResetAccount.Env())
	case rec.Kind == store.KindReset:
		base = s.ctlEnv
	case !s.opt.Mode.System():
	case rec.OwnerUID == nil:
		return spec, ErrNoOwner
	default:
		a, err := account.LookupUID(*rec.OwnerUID)
		if err != nil {
			return spec, fmt.Errorf("running the job as its owner %s: %w", rec.Owner, err)
		}
		if rec.Owner != "" && a.Name != rec.Owner {
			// The uid changed hands (or the user was renamed) since the
			// job was submitted: it is not this user's job to run.
			return spec, fmt.Errorf("uid %d is now user %s, not %s who submitted the job: %w", *rec.OwnerUID, a.Name, rec.Owner, ErrOwnerChanged)
		}
		spec.Account = &a
		base = append([]string{"PATH=" + loginPath}, a.Env()...)
	}
	spec.Env = jobEnv(base, rec)
	if s.opt.VisibleBDF && rec.Kind == store.KindJob {
		if _, own := rec.Env[VisibleEnvVar]; !own {
			addrs, err := pciAddresses(s.opt.SysfsPath, rec.Cards())
			if err != nil {
				return spec, fmt.Errorf("TT_DEVICE_VISIBLE=bdf: %w", err)
			}
			spec.Env = overrideEnv(spec.Env, []string{VisibleEnvVar + "=" + addrs})
		}
	}
	return spec, nil
}

// VisibleEnvVar is tt-umd's variable naming the cards it may open; a PCI
// address names a card exactly, whatever order tt-umd enumerates them in.
const VisibleEnvVar = "TT_VISIBLE_DEVICES"

// pciAddresses is the comma list of cards' PCI addresses, read from sysfs
// now, so a card renumbered since is still the one named.
func pciAddresses(sysfs string, cards []int) (string, error) {
	addrs := make([]string, len(cards))
	for i, n := range cards {
		id, err := ttsysfs.Identify(sysfs, n)
		if err != nil {
			return "", fmt.Errorf("reading the PCI address of card %d: %w", n, err)
		}
		addrs[i] = id.PCIAddress
	}
	return strings.Join(addrs, ","), nil
}

// controlEnv is the environment of reset and health commands, taken from
// queued's: PATH, HOME, USER, LOGNAME, SHELL, LANG, LC_ALL, TZ, the
// variables that point tools at their code (PYTHONPATH, LD_LIBRARY_PATH,
// VIRTUAL_ENV, ARCH_NAME, as tt-metal's setup has them) and every TT_
// variable (the commands' own settings, TT_METAL_*), and nothing else. Whatever else the service's environment holds (a
// secret an admin put in the unit, a proxy with credentials) stays out of
// reset logs, which every user may read. A reset run as
// TT_DEVICE_RESET_USER gets that user's HOME, USER, LOGNAME and SHELL.
func controlEnv(env []string) []string {
	keep := map[string]bool{"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "SHELL": true, "LANG": true, "LC_ALL": true, "TZ": true,
		"PYTHONPATH": true, "LD_LIBRARY_PATH": true, "VIRTUAL_ENV": true, "ARCH_NAME": true}
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if keep[name] || strings.HasPrefix(name, "TT_") {
			out = append(out, kv)
		}
	}
	return out
}

// loginPath is the PATH a job in system mode starts with, before the
// forwarded environment (which usually brings the submitter's own).
const loginPath = "/usr/local/bin:/usr/bin:/bin"

// overrideEnv is env with the variables of over replacing its own.
func overrideEnv(env, over []string) []string {
	out := make([]string, 0, len(env)+len(over))
	names := make(map[string]bool, len(over))
	for _, kv := range over {
		name, _, _ := strings.Cut(kv, "=")
		names[name] = true
	}
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); !names[name] {
			out = append(out, kv)
		}
	}
	return append(out, over...)
}

// jobEnv is base plus the job's own variables plus the two the queue
// sets. It never sets TT_VISIBLE_DEVICES.
func jobEnv(base []string, rec *store.Job) []string {
	env := make([]string, 0, len(base)+len(rec.Env)+2)
	for _, kv := range base {
		name := kv
		if i := strings.IndexByte(kv, '='); i >= 0 {
			name = kv[:i]
		}
		if _, over := rec.Env[name]; !over {
			env = append(env, kv)
		}
	}
	for k, v := range rec.Env {
		env = append(env, k+"="+v)
	}
	env = append(env, runner.JobEnvVar+"="+rec.ID, DeviceEnvVar+"="+rec.DeviceText())
	if rec.Agent != "" {
		env = append(env, AgentEnvVar+"="+rec.Agent)
	}
	if rec.ArrayID != "" {
		env = append(env, api.ArrayIDEnvVar+"="+rec.ArrayID, api.ArrayIndexEnvVar+"="+strconv.Itoa(rec.ArrayIndex))
	}
	return env
}
