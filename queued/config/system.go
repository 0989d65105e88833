package config

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ttkit/ttkit/queued/api"
)

// System mode's settings: one root queued for every user of the host
// (TT_DEVICE_SOCKET and the settings that only it uses).

// DefaultSystemStateDir is the state directory in system mode when
// TT_DEVICE_LOG_DIR is not set.
const DefaultSystemStateDir = "/var/lib/tt-device-queue"

// systemFromEnv reads the system-mode settings; the others need
// TT_DEVICE_SOCKET.
func (c *Config) systemFromEnv(get func(string) (string, bool)) error {
	if v, ok := get("TT_DEVICE_SOCKET"); ok {
		switch {
		case strings.ContainsRune(v, 0):
			return &EnvError{"TT_DEVICE_SOCKET", v, "contains a NUL byte"}
		case !filepath.IsAbs(v):
			return &EnvError{"TT_DEVICE_SOCKET", v, "want an absolute path"}
		case len(v) > api.MaxSocketPath:
			return &EnvError{"TT_DEVICE_SOCKET", v, fmt.Sprintf("%d bytes, over the %d a Unix socket's path may have", len(v), api.MaxSocketPath)}
		}
		c.Socket = filepath.Clean(v)
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"TT_DEVICE_SOCKET_GROUP", &c.SocketGroup}, {"TT_DEVICE_ADMIN_GROUP", &c.AdminGroup}, {"TT_DEVICE_RESET_USER", &c.ResetUser}} {
		v, ok := get(f.name)
		if !ok {
			continue
		}
		if c.Socket == "" {
			return &EnvError{f.name, v, "only system mode uses it: set TT_DEVICE_SOCKET too"}
		}
		if !validAccountName(v) {
			return &EnvError{f.name, v, "want a user or group name (letters, digits, '.', '_', '-') or a number"}
		}
		*f.dst = v
	}
	return nil
}

// validAccountName accepts the names useradd and groupadd accept (and
// numeric ids); anything else cannot name an account and is refused with
// the setting that gave it.
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
