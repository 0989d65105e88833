package config

import (
	"fmt"
	"path/filepath"

	"github.com/ttkit/ttkit/queued/api"
)

// System mode's settings: one root queued for every user of the host
// (TT_DEVICE_SOCKET and the settings tagged mode:"system", which only it
// reads).

// DefaultSystemStateDir is the state directory in system mode when
// TT_DEVICE_LOG_DIR is not set.
const DefaultSystemStateDir = "/var/lib/tt-device-queue"

// checkSocket refuses a system socket path that cannot be one.
func checkSocket(v string) error {
	switch {
	case !filepath.IsAbs(v):
		return fmt.Errorf("want an absolute path")
	case len(v) > api.MaxSocketPath:
		return fmt.Errorf("%d bytes, over the %d a Unix socket's path may have", len(v), api.MaxSocketPath)
	}
	return nil
}

// checkAccount accepts the names useradd and groupadd accept (and
// numeric ids); anything else cannot name an account and is refused with
// the setting that gave it.
func checkAccount(s string) error {
	if !validAccountName(s) {
		return fmt.Errorf("want a user or group name (letters, digits, '.', '_', '-') or a number")
	}
	return nil
}

func validAccountName(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' || r == '$') {
			return false
		}
	}
	return true
}

// Enforcing says TT_DEVICE_ENFORCE=acl: queued fences each card for the
// user whose job or hold runs on it (internal/devacl).
func (c Config) Enforcing() bool { return c.Enforce == "acl" }

// WaitsForForeign says whether a card starts no job while a process
// outside the queue holds it: TT_DEVICE_WAIT_FOREIGN as given, and under
// enforcement on unless it is given as 0, since a process that opened the
// card before its grant was taken back keeps its descriptor (the kernel
// does not revoke it) and would share the card with the next job.
func (c Config) WaitsForForeign() bool {
	return c.WaitForeign || c.Enforcing() && !c.WaitForeignSet
}
