package cli

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/config"
	"github.com/ttkit/ttkit/queued/doctor"
)

// DoctorCmd checks this host for queued and otelcol-tt and says how to fix
// each problem. It needs no daemon: the checks that ask queued fail with
// the command that starts it.
type DoctorCmd struct {
	Root string `default:"/" placeholder:"DIR" help:"Check the host whose root file system is mounted at DIR (its /proc, /sys and /dev), as from a container that mounts the host at /host."`
}

// Run runs the checks, prints them, and exits 1 when any failed.
func (d *DoctorCmd) Run(a *App) error {
	if !filepath.IsAbs(d.Root) {
		return usageErr("--root %q: want an absolute path", d.Root)
	}
	lookup := queuedEnv(os.LookupEnv)
	h := doctor.Default(d.Root)
	cfg, settings := doctor.CheckSettings(lookup, "queued.env, then this environment")
	if v, ok := lookup("TT_DEVICE_DRIVER_PATH"); ok && strings.TrimSpace(v) != "" {
		h.DriverPath = cfg.DriverPath // else the one under --root
	}
	if v, ok := lookup("TT_DEVICE_SYSFS_PATH"); ok && strings.TrimSpace(v) != "" {
		h.SysfsPath = cfg.SysfsPath // else the one under --root
	}
	h.Fitness = doctor.FitnessOf(cfg)
	h.Enforce = cfg.Enforcing()
	if cfg.Devices != nil {
		h.Cards, h.CardsFrom = cfg.Devices, "TT_DEVICE_IDS"
	}
	h.Home, _ = lookup("HOME")
	if h.Home != "" {
		h.UnitDir = filepath.Join(h.Home, ".config", "systemd", "user")
	}
	h.ResetCmd = cfg.ResetCmd
	h.HealthCheckCmd = cfg.HealthCheckCmd
	if h.HealthCheckCmd == "" {
		// As queued does: the health_check.py installed beside it, and
		// queued is installed beside this command.
		exe, err := os.Executable()
		if err == nil {
			script, _ := config.HealthCheckScript(filepath.Join(filepath.Dir(exe), "queued"))
			h.HealthCheckCmd = config.DefaultHealthCheckCmd(script)
		}
	}
	h.StateDir, h.StateDirErr = config.StateDir(os.LookupEnv)
	// Connect first, so the checks name the daemon that answered (the
	// user's own or the host's shared one) or every place that was tried.
	c, connErr := a.connect()
	h.Queued = func(ctx context.Context) (api.Status, error) {
		if connErr != nil {
			return api.Status{}, connErr
		}
		return c.Status(ctx)
	}
	switch {
	case a.url != "":
		h.QueuedAt = a.url
	case strings.TrimSpace(a.Host) == "" && a.Port == 0:
		h.QueuedAt = "its socket in " + h.StateDir + " nor at the host's shared socket " + api.SystemSocket
	default:
		h.QueuedAt = strings.TrimSpace(a.Host)
	}
	checks := append([]doctor.Check{settings}, doctor.Run(a.ctx, h)...)
	if a.JSON {
		if err := a.printJSON(checks); err != nil {
			return err
		}
	} else if err := doctor.WriteText(a.Out, termChecks(checks)); err != nil {
		return err
	}
	if doctor.Failed(checks) {
		return &Error{Code: ExitRefused}
	}
	return nil
}

// queuedEnv looks a setting up as queued's user unit would see it, from
// ~/.config/tt-device-queue/queued.env (the unit's EnvironmentFile), with
// this process's environment taking precedence so a setting can be tried
// before it is written down.
func queuedEnv(env func(string) (string, bool)) func(string) (string, bool) {
	file := map[string]string{}
	if home, ok := env("HOME"); ok && home != "" {
		if f, err := os.Open(filepath.Join(home, ".config", "tt-device-queue", "queued.env")); err == nil {
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				line := strings.TrimSpace(sc.Text())
				if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
					continue
				}
				name, value, ok := strings.Cut(line, "=")
				if !ok {
					continue
				}
				value = strings.TrimSpace(value)
				if len(value) >= 2 && (value[0] == '"' || value[0] == '\'') && value[len(value)-1] == value[0] {
					value = value[1 : len(value)-1]
				}
				file[strings.TrimSpace(name)] = value
			}
		}
	}
	return func(name string) (string, bool) {
		if v, ok := env(name); ok {
			return v, true
		}
		v, ok := file[name]
		return v, ok
	}
}

// termChecks is checks with their details and fixes made safe for a
// terminal (termText): they quote what the host's tools printed.
func termChecks(checks []doctor.Check) []doctor.Check {
	out := make([]doctor.Check, len(checks))
	for i, c := range checks {
		c.Detail, c.Fix = termText(c.Detail), termText(c.Fix)
		out[i] = c
	}
	return out
}
