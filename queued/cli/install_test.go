package cli_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestInstallScript runs scripts/install.sh (what make install runs) with a
// stand-in systemctl that records its calls, against a real queued: it
// installs the binaries, the health check and the unit, starts an inactive
// service, refuses to restart one that is running a job unless FORCE=1, and
// skips the service step where systemctl --user is unavailable.
func TestInstallScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries again")
	}
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t)
	tmp := t.TempDir()
	prefix, config, stubs := filepath.Join(tmp, "prefix"), filepath.Join(tmp, "config"), filepath.Join(tmp, "stubs")
	log, active, noUser := filepath.Join(tmp, "systemctl.log"), filepath.Join(tmp, "active"), filepath.Join(tmp, "no-user-manager")
	if err := os.MkdirAll(stubs, 0o755); err != nil {
		t.Fatal(err)
	}
	stub := `#!/bin/sh
echo "$*" >>` + log + `
case "$*" in
"--user show-environment") [ -e ` + noUser + ` ] && exit 1; exit 0 ;;
"--user is-active --quiet queued") [ -e ` + active + ` ] && exit 0; exit 3 ;;
esac
exit 0
`
	if err := os.WriteFile(filepath.Join(stubs, "systemctl"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	goEnv := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	// HOME changes below; keep the Go caches and settings the test was
	// built with, so the script's build needs no network.
	env := append(os.Environ(), "GOCACHE="+goEnv("GOCACHE"), "GOMODCACHE="+goEnv("GOMODCACHE"),
		"GOPATH="+goEnv("GOPATH"), "GOENV="+goEnv("GOENV"), "GOFLAGS="+goEnv("GOFLAGS"), "GOPROXY="+goEnv("GOPROXY"),
		"HOME="+d.home, "TT_DEVICE_LOG_DIR="+d.state, "PREFIX="+prefix, "XDG_CONFIG_HOME="+config,
		"PATH="+stubs+":"+os.Getenv("PATH"), "SKIP_TESTS=1", "FORCE=")
	install := func(extra ...string) result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "scripts/install.sh")
		cmd.Dir, cmd.Env = root, append(append([]string(nil), env...), extra...)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		r := result{stdout: out.String(), stderr: errb.String()}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			r.code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return r
	}
	calls := func() string {
		b, _ := os.ReadFile(log)
		os.Remove(log)
		return string(b)
	}

	r := install()
	r.want(t, 0, []string{"Installing into " + prefix + "/bin", "Starting queued", "CARD", "queued is running"}, nil)
	if c := calls(); !strings.Contains(c, "--user daemon-reload") || !strings.Contains(c, "--user enable --quiet --now queued") {
		t.Fatalf("systemctl calls for an inactive service:\n%s", c)
	}
	for _, f := range []string{"bin/queued", "bin/tt-device-queue", "share/tt-device-queue/health_check.py"} {
		if _, err := os.Stat(filepath.Join(prefix, f)); err != nil {
			t.Errorf("not installed: %v", err)
		}
	}
	unit, err := os.ReadFile(filepath.Join(config, "systemd", "user", "queued.service"))
	if err != nil || !strings.Contains(string(unit), "\nExecStart="+prefix+"/bin/queued\n") || !strings.Contains(string(unit), "\nKillMode=mixed\n") {
		t.Fatalf("installed unit (%v):\n%s", err, unit)
	}

	// A running job blocks the restart.
	if err := os.WriteFile(active, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	g := newGate(t)
	defer g.open(t)
	id := strings.TrimSpace(d.run("queue", "--", g.wait()).stdout)
	d.waitState(id, "running")
	install().want(t, 1, nil, []string{"jobs are running", "FORCE=1", id[:8]})
	if c := calls(); strings.Contains(c, "restart") {
		t.Fatalf("restarted a queue that runs a job:\n%s", c)
	}
	install("FORCE=1").want(t, 0, []string{"FORCE=1: restarting although jobs are running", "Restarting queued"}, nil)
	if c := calls(); !strings.Contains(c, "--user restart queued") {
		t.Fatalf("FORCE=1 did not restart:\n%s", c)
	}
	g.open(t)
	d.run("result", id).want(t, 0, nil, nil)
	install().want(t, 0, []string{"Restarting queued"}, nil)
	calls()

	// No user service manager: files only, and a note.
	if err := os.WriteFile(noUser, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	install().want(t, 0, []string{"systemctl --user is not available here", "start the daemon by hand"}, nil)
	if c := calls(); strings.Contains(c, "restart") || strings.Contains(c, "enable") {
		t.Fatalf("touched the service without a user manager:\n%s", c)
	}
}

// TestServiceUnitVerifies asks systemd to check the unit, where it can.
func TestServiceUnitVerifies(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze here")
	}
	unit, err := os.ReadFile("../../deploy/systemd/queued.service")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "queued.service")
	// Point ExecStart at an executable that exists, as verify requires.
	fixed := strings.Replace(string(unit), "ExecStart=%h/.local/bin/queued", "ExecStart="+filepath.Join(bin, "queued"), 1)
	if err := os.WriteFile(path, []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
