package api

import "fmt"

// Mode is how a queued serves, decided once when it starts: for the one
// user who runs it (user mode, the default), or, as root, for every user
// of the host, each job run as its submitter (system mode, turned on by
// TT_DEVICE_SOCKET). Everything that differs between the two asks the
// mode instead of comparing settings or strings: who may connect and do
// what, as whom a job runs, where the state lives, which checks `doctor`
// runs. GET /status carries it as "mode".
type Mode string

// The modes.
const (
	UserMode   Mode = "user"
	SystemMode Mode = "system"
)

// System reports whether the daemon serves every user of the host.
func (m Mode) System() bool { return m == SystemMode }

// String is the mode's name as GET /status and the logs give it.
func (m Mode) String() string { return string(m) }

// ParseMode reads a mode's name; an empty one (a daemon from before modes
// were reported) is user mode.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "", UserMode:
		return UserMode, nil
	case SystemMode:
		return SystemMode, nil
	}
	return "", fmt.Errorf("unknown mode %q (want %s or %s)", s, UserMode, SystemMode)
}
