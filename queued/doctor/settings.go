package doctor

import (
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
	return cfg, Check{Name: "settings", Status: OK, Detail: detail}
}
