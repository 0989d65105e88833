package doctor

import (
	"fmt"
	"strings"

	"github.com/ttkit/ttkit/queued/config"
)

// CheckSettings is the settings check: whether queued would start with
// the settings lookup gives (from names where they come from, for the
// detail), and which of queued's settings they change. Both come from
// queued's declaration of its settings (config.Settings), so a setting
// added there is checked and shown here too. It returns the
// configuration queued would run with, or the defaults when queued would
// refuse the settings.
func CheckSettings(lookup config.Lookup, from string) (config.Config, Check) {
	cfg, err := config.FromEnv(lookup)
	if err != nil {
		return config.Default(), Check{Name: "settings", Status: Fail, Detail: err.Error(),
			Fix: "correct it in ~/.config/tt-device-queue/queued.env (queued --help lists every setting)"}
	}
	given := config.GivenBy(lookup)
	detail := "queued's settings (" + from + ") are valid; "
	if len(given) == 0 {
		detail += "each is its default"
	} else {
		set := make([]string, len(given))
		for i, g := range given {
			set[i] = g.Env + "=" + g.Value
		}
		detail += "given: " + strings.Join(set, ", ")
	}
	if cfg.Mode.System() {
		detail += "; " + SharesText(cfg.Shares(), cfg.MaxQueued)
	}
	return cfg, Check{Name: "settings", Status: OK, Detail: detail}
}

// SharesText says what one user of a shared (system-mode) queued may
// have, as doctor shows it: the per-user bounds in effect and who is
// held to none of them.
func SharesText(sh config.Shares, maxQueued int) string {
	return fmt.Sprintf("each user may have %d of the %d queued jobs, %d finished jobs, %s of output, %d connections, %d long-polls waiting and %d handlers at once "+
		"(root, queued's own user and TT_DEVICE_ADMIN_GROUP's members only the totals)",
		sh.Queued, maxQueued, sh.Completed, bytesText(sh.OutputBytes), sh.Conns, sh.Waits, sh.Workers)
}

// bytesText is n bytes as people read it: "1 GiB", "16 MiB", "300 bytes".
func bytesText(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
		if n >= u.size {
			return fmt.Sprintf("%.1f %s", float64(n)/float64(u.size), u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
