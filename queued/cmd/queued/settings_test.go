package main

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/config"
)

// A flag's bad value is refused naming the flag and the value, as a bad
// variable names the variable: every bound a setting declares, whichever
// way the value came.
func TestQueued_RefusesBadFlagNamingFlagAndValue(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-queued-jobs", "0"}, `--max-queued-jobs="0": want a whole number of at least 1`},
		{[]string{"--http-workers=-3"}, `--http-workers="-3": want a whole number of at least 1`},
		{[]string{"--default-timeout", "0"}, `--default-timeout="0": want a whole number of seconds, at least 1`},
		{[]string{"--kill-grace=-1"}, `--kill-grace="-1": want a whole number of seconds, at least 0`},
		{[]string{"--max-log-bytes", "0"}, `--max-log-bytes="0": want a whole number of bytes, at least 1`},
		{[]string{"--driver-path", "proc/driver"}, `--driver-path="proc/driver": want an absolute path`},
		{[]string{"--device-ids", "0,0"}, `--device-ids`},
		// The cross-field checks name both settings, with their flags.
		{[]string{"--default-timeout", "100", "--max-timeout", "50"}, "(TT_DEVICE_DEFAULT_TIMEOUT or --default-timeout) is above the maximum 50s (TT_DEVICE_MAX_TIMEOUT or --max-timeout)"},
	} {
		cmd := exec.Command(bin, tc.args...)
		cmd.Env = env("TT_DEVICE_IDS=0", "TT_DEVICE_LOG_DIR="+state)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !strings.Contains(string(out), tc.want) {
			t.Errorf("queued %s: %v, output %q; want a failure saying %q", strings.Join(tc.args, " "), err, out, tc.want)
		}
	}
}

// A flag overrides its variable, a blank variable keeps the default, and
// a setting with no flag is read from its variable: what GET /status
// reports is what was given.
func TestQueued_FlagsOverrideVariables(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--max-queued-jobs", "7", "--wait-foreign")
	d := startDaemonCmd(t, state, cmd, "TT_DEVICE_MAX_QUEUED_JOBS=5", "TT_DEVICE_HTTP_WORKERS=", "TT_DEVICE_WAIT_FOREIGN=no",
		"TT_DEVICE_DEFAULT_TIMEOUT= ")
	st, err := d.client.Status(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.MaxQueued != 7 || len(st.Cards) != 2 {
		t.Fatalf("max queued %d with the flag 7 and the variable 5, %d cards; want 7 and the 2 of TT_DEVICE_IDS", st.MaxQueued, len(st.Cards))
	}
	// The start's log line, written once it serves, says what it waits for.
	d.waitStarted(func() bool { return strings.Contains(d.stderr.String(), "msg=\"queued listening\"") })
	if !strings.Contains(d.stderr.String(), "wait_foreign=true") {
		t.Errorf("--wait-foreign did not override TT_DEVICE_WAIT_FOREIGN=no:\n%s", d.stderr.String())
	}
	// A variable alone is read.
	d2 := startDaemonWith(t, t.TempDir(), bin, "TT_DEVICE_MAX_QUEUED_JOBS=5")
	if st, err := d2.client.Status(ctx(t)); err != nil || st.MaxQueued != 5 {
		t.Fatalf("TT_DEVICE_MAX_QUEUED_JOBS=5: max queued %d, %v", st.MaxQueued, err)
	}
}

// --help lists every setting the declaration has, by variable and by
// flag, with its default.
func TestQueued_HelpListsEverySetting(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, s := range config.Settings {
		for _, want := range []string{s.Env, s.Flag} {
			if want != "" && !strings.Contains(string(out), want) {
				t.Errorf("--help does not mention %s", want)
			}
		}
		if s.Env != "" && !strings.Contains(string(out), "Default: "+s.Default+".") {
			t.Errorf("--help does not give %s's default %q", s.Env, s.Default)
		}
	}
}
