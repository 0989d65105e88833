package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TT_DEVICE_RECOVERY_CMDS: rungs separated by ";;", each with an optional
// "SEC:" timeout; TT_DEVICE_RECOVERY_MAX_PER_HOUR: 1 to 60, default 3.
func TestFromEnv_RecoverySettings(t *testing.T) {
	c, err := FromEnv(env(map[string]string{"HOME": "/h"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.RecoveryCmds != "" || c.RecoveryMaxPerHour != 3 {
		t.Fatalf("recovery defaults: cmds %q, max per hour %d", c.RecoveryCmds, c.RecoveryMaxPerHour)
	}
	c, err = FromEnv(env(map[string]string{"HOME": "/h",
		"TT_DEVICE_RECOVERY_CMDS":         "600:ipmitool -H bmc power cycle ;; /usr/local/bin/pcie-rescan {device}",
		"TT_DEVICE_RECOVERY_MAX_PER_HOUR": "5",
	}))
	if err != nil {
		t.Fatal(err)
	}
	rungs, err := ParseRecoveryCmds(c.RecoveryCmds)
	want := []RecoveryRung{{Cmd: "ipmitool -H bmc power cycle", Timeout: 600 * time.Second}, {Cmd: "/usr/local/bin/pcie-rescan {device}"}}
	if err != nil || len(rungs) != 2 || rungs[0] != want[0] || rungs[1] != want[1] || c.RecoveryMaxPerHour != 5 {
		t.Fatalf("rungs = %+v, %v; max per hour %d", rungs, err, c.RecoveryMaxPerHour)
	}
	for name, val := range map[string]string{
		"TT_DEVICE_RECOVERY_CMDS":         "reset-a ;; ;; reset-b",
		"TT_DEVICE_RECOVERY_MAX_PER_HOUR": "0",
	} {
		_, err := FromEnv(env(map[string]string{"HOME": "/h", name: val}))
		var ee *EnvError
		if !errors.As(err, &ee) || ee.Var != name || !strings.Contains(err.Error(), val) {
			t.Errorf("%s=%s: %v", name, val, err)
		}
	}
}

// Each bad rung is refused with a word on what is wrong and which rung.
func TestParseRecoveryCmds(t *testing.T) {
	for val, want := range map[string]string{
		" ;; a":                        "rung 1 is empty",
		"a ;; 0:b":                     "rung 2: timeout 0 is not between 1 and 86400 seconds",
		"a ;; 99999:b":                 "rung 2: timeout 99999 is not between 1 and 86400 seconds",
		"60:":                          "rung 1 has a timeout and no command",
		strings.Repeat("a;;", 8) + "a": "9 rungs; at most 8",
	} {
		_, err := ParseRecoveryCmds(val)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", val, err, want)
		}
	}
	if rungs, err := ParseRecoveryCmds(""); err != nil || len(rungs) != 0 {
		t.Errorf("empty: %v, %v", rungs, err)
	}
	// A colon that is not after a number is the command's.
	if rungs, err := ParseRecoveryCmds("ipmitool -H bmc:623 power cycle"); err != nil || len(rungs) != 1 || rungs[0].Cmd != "ipmitool -H bmc:623 power cycle" || rungs[0].Timeout != 0 {
		t.Errorf("a colon in the command: %+v, %v", rungs, err)
	}
}
