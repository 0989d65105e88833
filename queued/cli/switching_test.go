package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunQueue_DotOnPythonPath: run and queue jobs get "." first on
// PYTHONPATH, as the Python tool gave every job, keeping what the shell
// or --env gave and never adding it twice.
func TestRunQueue_DotOnPythonPath(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"run", "--", "echo PP=$PYTHONPATH"}, "PP=.\n"},
		{[]string{"PYTHONPATH=/opt/x"}, []string{"run", "--", "echo PP=$PYTHONPATH"}, "PP=.:/opt/x\n"},
		{[]string{"PYTHONPATH=/opt/x:."}, []string{"run", "--", "echo PP=$PYTHONPATH"}, "PP=/opt/x:.\n"},
		{[]string{"PYTHONPATH=/opt/x"}, []string{"run", "--no-inherit-env", "--", "echo PP=$PYTHONPATH"}, "PP=.\n"},
	} {
		d.runWith(tc.env, "", tc.args...).want(t, 0, []string{tc.want}, nil)
	}
	id := strings.TrimSpace(d.run("queue", "--", "echo PP=$PYTHONPATH").stdout)
	d.run("result", id).want(t, 0, []string{"PP=.\n"}, nil)
}

// TestLoginShell: with TT_DEVICE_LOGIN_SHELL=1 a job runs in bash -lc,
// so what ~/.profile sets up is there; without it, bash -c reads no
// profile.
func TestLoginShell(t *testing.T) {
	t.Parallel()
	profile := func(state string) {
		home := filepath.Join(filepath.Dir(state), "home")
		if err := os.WriteFile(filepath.Join(home, ".profile"), []byte("export PROFILE_SEEN=yes\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	login := startDaemonWith(t, profile, "TT_DEVICE_LOGIN_SHELL=1")
	login.run("run", "--", "echo P=$PROFILE_SEEN; if shopt -q login_shell; then echo LOGIN; fi").want(t, 0, []string{"P=yes\n", "LOGIN\n"}, nil)
	plain := startDaemonWith(t, profile)
	r := plain.run("run", "--", "echo P=$PROFILE_SEEN; if shopt -q login_shell; then echo LOGIN; fi")
	r.want(t, 0, []string{"P=\n"}, nil)
	if strings.Contains(r.stdout, "LOGIN") {
		t.Fatalf("a job ran in a login shell without TT_DEVICE_LOGIN_SHELL: %v", r)
	}
}
