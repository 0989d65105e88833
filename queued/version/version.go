// Package version names the build of queued and tt-device-queue, so the
// CLI can tell when it talks to a daemon of another build (after an
// install that did not restart the service, say) and the daemon's metrics
// carry it as service.version.
package version

import "runtime/debug"

// Release is set at link time for a release build
// (-ldflags "-X github.com/ttkit/ttkit/queued/version.Release=v1.2.0");
// empty otherwise.
var Release string

// String is Release, else the module version, else the VCS revision (12
// hex digits, "-dirty" when the tree had changes), else "devel".
func String() string {
	if Release != "" {
		return Release
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "devel"
	}
	return rev[:min(len(rev), 12)] + dirty
}
