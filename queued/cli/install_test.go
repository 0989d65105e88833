package cli_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// installRig runs scripts/install.sh (what make install runs) with a
// stand-in systemctl on PATH that records its calls, against a real queued.
type installRig struct {
	t                           *testing.T
	d                           *daemon
	root, prefix, config        string
	log, active, noUser, envDir string
	managerEnv                  string // what show-environment prints
	env                         []string
}

func newInstallRig(t *testing.T) *installRig {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t)
	tmp := t.TempDir()
	r := &installRig{t: t, d: d, root: root, prefix: filepath.Join(tmp, "prefix"), config: filepath.Join(tmp, "config"),
		log: filepath.Join(tmp, "systemctl.log"), active: filepath.Join(tmp, "active"), noUser: filepath.Join(tmp, "no-user-manager"),
		managerEnv: filepath.Join(tmp, "manager.env"),
		// The unit reads %h/.config/tt-device-queue/queued.env: %h is
		// HOME, whatever XDG_CONFIG_HOME says.
		envDir: filepath.Join(d.home, ".config", "tt-device-queue")}
	stubs := filepath.Join(tmp, "stubs")
	if err := os.MkdirAll(stubs, 0o755); err != nil {
		t.Fatal(err)
	}
	stub := `#!/bin/sh
echo "$*" >>` + r.log + `
case "$*" in
"--user show-environment") [ -e ` + r.noUser + ` ] && exit 1; cat ` + r.managerEnv + ` 2>/dev/null; exit 0 ;;
"--user is-active --quiet queued") [ -e ` + r.active + ` ] && exit 0; exit 3 ;;
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
	// The service's settings come from the rig, never from the shell
	// running the tests.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TT_DEVICE_") {
			r.env = append(r.env, kv)
		}
	}
	r.env = append(r.env, "GOCACHE="+goEnv("GOCACHE"), "GOMODCACHE="+goEnv("GOMODCACHE"),
		"GOPATH="+goEnv("GOPATH"), "GOENV="+goEnv("GOENV"), "GOFLAGS="+goEnv("GOFLAGS"), "GOPROXY="+goEnv("GOPROXY"),
		"HOME="+d.home, "TT_DEVICE_LOG_DIR="+d.state, "PREFIX="+r.prefix, "XDG_CONFIG_HOME="+r.config,
		"PATH="+stubs+":"+os.Getenv("PATH"), "SKIP_TESTS=1", "FORCE=")
	return r
}

// install runs the script with the rig's environment plus extra.
func (r *installRig) install(extra ...string) result {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "scripts/install.sh")
	cmd.Dir, cmd.Env = r.root, append(append([]string(nil), r.env...), extra...)
	return runCmd(r.t, cmd)
}

// calls returns and forgets the systemctl calls so far.
func (r *installRig) calls() string {
	b, _ := os.ReadFile(r.log)
	os.Remove(r.log)
	return string(b)
}

func (r *installRig) touch(path string) {
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		r.t.Fatal(err)
	}
}

// TestInstallScript: the script installs the binaries, the health check
// and the unit, starts an inactive service, refuses to restart one that is
// running a job unless FORCE=1, and skips the service step where
// systemctl --user is unavailable.
func TestInstallScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries again")
	}
	t.Parallel()
	r := newInstallRig(t)
	d := r.d
	// The service gets its state directory from the user manager's
	// environment (systemctl --user set-environment or import-environment).
	if err := os.WriteFile(r.managerEnv, []byte("HOME="+d.home+"\nTT_DEVICE_LOG_DIR="+d.state+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	r.install().want(t, 0, []string{"Installing into " + r.prefix + "/bin", "Starting queued", "CARD", "queued is running"}, nil)
	if c := r.calls(); !strings.Contains(c, "--user daemon-reload") || !strings.Contains(c, "--user enable --quiet --now queued") {
		t.Fatalf("systemctl calls for an inactive service:\n%s", c)
	}
	for _, f := range []string{"bin/queued", "bin/queued-exec", "bin/tt-device-queue", "share/tt-device-queue/health_check.py"} {
		if _, err := os.Stat(filepath.Join(r.prefix, f)); err != nil {
			t.Errorf("not installed: %v", err)
		}
	}
	unit, err := os.ReadFile(filepath.Join(r.config, "systemd", "user", "queued.service"))
	if err != nil || !strings.Contains(string(unit), "\nExecStart="+r.prefix+"/bin/queued\n") || !strings.Contains(string(unit), "\nKillMode=mixed\n") {
		t.Fatalf("installed unit (%v):\n%s", err, unit)
	}

	// A running job blocks the restart.
	r.touch(r.active)
	g := newGate(t)
	defer g.open(t)
	id := strings.TrimSpace(d.run("queue", "--", g.wait()).stdout)
	d.waitState(id, "running")
	r.install().want(t, 1, nil, []string{"jobs are running", "FORCE=1", id[:8]})
	if c := r.calls(); strings.Contains(c, "restart") {
		t.Fatalf("restarted a queue that runs a job:\n%s", c)
	}
	r.install("FORCE=1").want(t, 0, []string{"FORCE=1: restarting although jobs are running", "Restarting queued"}, nil)
	if c := r.calls(); !strings.Contains(c, "--user restart queued") {
		t.Fatalf("FORCE=1 did not restart:\n%s", c)
	}
	g.open(t)
	d.run("result", id).want(t, 0, nil, nil)
	r.install().want(t, 0, []string{"Restarting queued"}, nil)
	r.calls()

	// No user service manager: files only, and a note.
	r.touch(r.noUser)
	r.install().want(t, 0, []string{"systemctl --user is not available here", "start the daemon by hand"}, nil)
	if c := r.calls(); strings.Contains(c, "restart") || strings.Contains(c, "enable") {
		t.Fatalf("touched the service without a user manager:\n%s", c)
	}
}

// TestInstallScriptFailsClosed: when the running service cannot be asked
// whether it runs a job, the script refuses to restart it unless FORCE=1;
// and it asks with the settings of the unit's EnvironmentFile, so a state
// directory set only there is found. The installing shell's
// TT_DEVICE_LOG_DIR (the rig sets it) is not what the service sees, so it
// is ignored.
func TestInstallScriptFailsClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries again")
	}
	t.Parallel()
	r := newInstallRig(t)
	d := r.d
	r.touch(r.active)
	g := newGate(t)
	defer g.open(t)
	id := strings.TrimSpace(d.run("queue", "--", g.wait()).stdout)
	d.waitState(id, "running")

	// The state directory is set nowhere the service could see: the
	// daemon cannot be asked, so nothing is restarted.
	r.install().want(t, 1, nil, []string{"cannot ask", "FORCE=1"})
	if c := r.calls(); strings.Contains(c, "restart") {
		t.Fatalf("restarted a queue it could not ask:\n%s", c)
	}
	// FORCE=1 restarts it; the script still cannot reach it afterwards
	// and says so (the stand-in systemctl restarts nothing).
	r.install("FORCE=1").want(t, 1, []string{"FORCE=1: restarting although", "Restarting queued"}, []string{"did not answer"})
	if c := r.calls(); !strings.Contains(c, "--user restart queued") {
		t.Fatalf("FORCE=1 did not restart:\n%s", c)
	}

	// Set in the service's settings file (with a comment, a blank line and
	// quotes, as systemd allows), the state directory is found: the
	// running job blocks the restart, and once it ends the restart goes on.
	if err := os.MkdirAll(r.envDir, 0o700); err != nil {
		t.Fatal(err)
	}
	settings := "# queued settings\n\nTT_DEVICE_IDS=0,1\nTT_DEVICE_LOG_DIR=\"" + d.state + "\"\n"
	if err := os.WriteFile(filepath.Join(r.envDir, "queued.env"), []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}
	r.install().want(t, 1, nil, []string{"jobs are running", id[:8]})
	if c := r.calls(); strings.Contains(c, "restart") {
		t.Fatalf("restarted a queue that runs a job:\n%s", c)
	}
	g.open(t)
	d.run("result", id).want(t, 0, nil, nil)
	r.install().want(t, 0, []string{"Restarting queued", "queued is running"}, nil)
	if c := r.calls(); !strings.Contains(c, "--user restart queued") {
		t.Fatalf("an idle queue was not restarted:\n%s", c)
	}
}

// TestServiceUnitVerifies asks systemd to check the unit, where it can.
func TestServiceUnitVerifies(t *testing.T) {
	t.Parallel()
	verifyUnit(t, "queued.service", "%h/.local/bin/queued")
}

// verifyUnit runs systemd-analyze verify on the shipped unit name, with
// its ExecStart (execStart) pointed at the test's queued, as verify wants
// an executable that exists. verify exits 0 on unknown or unparsable
// settings and only prints them, so any output fails the test.
func verifyUnit(t *testing.T, name, execStart string) {
	t.Helper()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze here")
	}
	unit, err := os.ReadFile(filepath.Join("../../deploy/systemd", name))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	fixed := strings.Replace(string(unit), "ExecStart="+execStart, "ExecStart="+filepath.Join(bin, "queued"), 1)
	if err := os.WriteFile(path, []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify %s: %v\n%s", name, err, out)
	}
}
