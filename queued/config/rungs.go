package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// TT_DEVICE_RECOVERY_CMDS is the site's own rungs of the recovery ladder,
// climbed after the reset and the deep reset: shell commands separated by
// ";;" (one line, as a systemd Environment= or drop-in line wants it;
// a command that needs ";;" itself, a case statement, belongs in a
// script), each with {device} substituted and an optional timeout in
// seconds before a colon: "600:ipmitool -H bmc power cycle ;;
// /usr/local/bin/pcie-rescan {device}". A rung without a timeout gets
// TT_DEVICE_DEEP_RESET_TIMEOUT's.

// RecoverySeparator separates the rungs of TT_DEVICE_RECOVERY_CMDS.
const RecoverySeparator = ";;"

// MaxRecoveryRungs bounds the site's rungs: each may take its timeout and
// a health check while the card's queue waits, and a ladder of more than
// eight rungs is a script's job.
const MaxRecoveryRungs = 8

// maxRungSeconds bounds one rung's timeout: a day.
const maxRungSeconds = 86400

// RecoveryRung is one site rung of TT_DEVICE_RECOVERY_CMDS: its command
// and its timeout (0: TT_DEVICE_DEEP_RESET_TIMEOUT's).
type RecoveryRung struct {
	Cmd     string
	Timeout time.Duration
}

// ParseRecoveryCmds reads TT_DEVICE_RECOVERY_CMDS into its rungs ("" is
// none). It refuses an empty rung, a timeout outside 1 to 86400 seconds,
// a timeout without a command and more than MaxRecoveryRungs rungs,
// saying which rung.
func ParseRecoveryCmds(v string) ([]RecoveryRung, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	parts := strings.Split(v, RecoverySeparator)
	if len(parts) > MaxRecoveryRungs {
		return nil, fmt.Errorf("%d rungs; at most %d", len(parts), MaxRecoveryRungs)
	}
	rungs := make([]RecoveryRung, 0, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, fmt.Errorf("rung %d is empty (rungs are separated by %q)", i+1, RecoverySeparator)
		}
		var r RecoveryRung
		if head, rest, ok := strings.Cut(p, ":"); ok && isDigits(head) {
			n, err := strconv.Atoi(head)
			if err != nil || n < 1 || n > maxRungSeconds {
				return nil, fmt.Errorf("rung %d: timeout %s is not between 1 and %d seconds", i+1, head, maxRungSeconds)
			}
			r.Timeout = time.Duration(n) * time.Second
			p = strings.TrimSpace(rest)
			if p == "" {
				return nil, fmt.Errorf("rung %d has a timeout and no command", i+1)
			}
		}
		r.Cmd = p
		rungs = append(rungs, r)
	}
	return rungs, nil
}

// isDigits reports whether s is a non-empty run of ASCII digits.
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
