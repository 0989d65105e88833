package cli_test

import (
	"bufio"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// systemInstall runs scripts/install-system.sh (what make install-system
// runs) into a temporary DESTDIR, with a stand-in systemctl on PATH that
// records any call: under DESTDIR the script must leave the service alone.
type systemInstall struct {
	t                 *testing.T
	repo, dest, calls string
	env               []string
	umask             string
	cred              *syscall.Credential
}

func newSystemInstall(t *testing.T) *systemInstall {
	t.Helper()
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	s := &systemInstall{t: t, repo: repo, dest: filepath.Join(tmp, "root"), calls: filepath.Join(tmp, "systemctl.log"), umask: "022"}
	stubs := filepath.Join(tmp, "stubs")
	if err := os.MkdirAll(stubs, 0o755); err != nil {
		t.Fatal(err)
	}
	stub := "#!/bin/sh\necho \"$*\" >>" + s.calls + "\nexit 0\n"
	if err := os.WriteFile(filepath.Join(stubs, "systemctl"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	// The daemon's settings of the shell running the tests are not the
	// script's business.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TT_DEVICE_") && !strings.HasPrefix(kv, "PATH=") {
			s.env = append(s.env, kv)
		}
	}
	s.env = append(s.env, "PATH="+stubs+":"+os.Getenv("PATH"), "SKIP_TESTS=1", "DESTDIR="+s.dest,
		"PREFIX=", "SOCKET_GROUP=", "NO_BUILD=")
	return s
}

// run runs the script under the umask s.umask with the rig's environment
// plus extra (later entries win).
func (s *systemInstall) run(extra ...string) result {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "umask "+s.umask+" && exec bash scripts/install-system.sh")
	cmd.Dir, cmd.Env = s.repo, append(append([]string(nil), s.env...), extra...)
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return runCmd(s.t, cmd)
}

// wantFile checks that the installed path exists with mode and owner root.
func (s *systemInstall) wantFile(rel string, mode fs.FileMode) {
	s.t.Helper()
	fi, err := os.Lstat(filepath.Join(s.dest, rel))
	if err != nil {
		s.t.Errorf("not installed: %v", err)
		return
	}
	if fi.Mode()&(fs.ModePerm|fs.ModeType) != mode {
		s.t.Errorf("%s: mode %v, want %v", rel, fi.Mode(), mode)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || st.Gid != 0 {
		s.t.Errorf("%s: owned by %d:%d, want root:root", rel, st.Uid, st.Gid)
	}
}

func (s *systemInstall) read(rel string) string {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dest, rel))
	if err != nil {
		s.t.Fatal(err)
	}
	return string(b)
}

// TestInstallSystemScript: make install-system, into a DESTDIR, installs
// the binaries, the health check and the system unit root-owned with modes
// every user can use even under root's umask 077, writes the settings
// template once (with the socket group when given) and never overwrites
// it, creates the socket group in DESTDIR's group file only, follows
// PREFIX in the unit's ExecStart, never calls systemctl under DESTDIR, and
// refuses a bad group name and a caller that is not root.
func TestInstallSystemScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries again")
	}
	if os.Geteuid() != 0 {
		t.Skip("installs root-owned files; CI runs as root")
	}
	t.Parallel()
	s := newSystemInstall(t)
	// A group file in DESTDIR: the group is created there, not on the host.
	if err := os.MkdirAll(filepath.Join(s.dest, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, line := range map[string]string{"group": "root:x:0:\n", "gshadow": "root:*::\n"} {
		if err := os.WriteFile(filepath.Join(s.dest, "etc", name), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const group = "ttq-install-test"
	s.umask = "077" // root's umask on a hardened host
	s.run("SOCKET_GROUP="+group).want(t, 0, []string{"Building queued", "Wrote the settings template",
		"Created the group " + group, "DESTDIR is set: leaving the service alone"}, nil)

	for _, dir := range []string{"usr", "usr/local", "usr/local/bin", "usr/local/share", "usr/local/share/tt-device-queue",
		"etc/systemd", "etc/systemd/system", "etc/default"} {
		s.wantFile(dir, fs.ModeDir|0o755)
	}
	s.wantFile("usr/local/bin/queued", 0o755)
	s.wantFile("usr/local/bin/queued-exec", 0o755)
	s.wantFile("usr/local/bin/tt-device-queue", 0o755)
	s.wantFile("usr/local/share/tt-device-queue/health_check.py", 0o644)
	s.wantFile("etc/systemd/system/queued-system.service", 0o644)
	s.wantFile("etc/default/tt-device-queue", 0o644)
	if out, err := exec.Command(filepath.Join(s.dest, "usr/local/bin/tt-device-queue"), "--version").CombinedOutput(); err != nil {
		t.Errorf("installed tt-device-queue does not run: %v\n%s", err, out)
	}
	shipped, err := os.ReadFile("../../deploy/systemd/queued-system.service")
	if err != nil {
		t.Fatal(err)
	}
	if unit := s.read("etc/systemd/system/queued-system.service"); unit != string(shipped) {
		t.Errorf("installed unit differs from deploy/systemd/queued-system.service with the default PREFIX:\n%s", unit)
	}
	defaults := s.read("etc/default/tt-device-queue")
	if !strings.Contains(defaults, "\nTT_DEVICE_SOCKET_GROUP="+group+"\n") || !strings.Contains(defaults, "\n#TT_DEVICE_ADMIN_GROUP=") ||
		!strings.Contains(defaults, "/usr/local/share/tt-device-queue/health_check.py {device}") {
		t.Errorf("settings template:\n%s", defaults)
	}
	if g := s.read("etc/group"); !strings.Contains(g, "\n"+group+":x:") {
		t.Errorf("group %s not created in DESTDIR's etc/group:\n%s", group, g)
	}
	if out, err := exec.Command("getent", "group", group).CombinedOutput(); err == nil {
		t.Errorf("the host got the group: %s", out)
	}

	// Again, with another PREFIX and the binaries as they are: the
	// operator's settings stay as they are, and a socket group they do
	// not set is pointed out rather than written.
	s.umask = "022"
	mine := defaults + "TT_DEVICE_IDS=7\n"
	if err := os.WriteFile(filepath.Join(s.dest, "etc/default/tt-device-queue"), []byte(mine), 0o644); err != nil {
		t.Fatal(err)
	}
	s.run("PREFIX=/opt/ttkit", "NO_BUILD=1", "SOCKET_GROUP=other").want(t, 0,
		[]string{"NO_BUILD=1", "Keeping", "does not set TT_DEVICE_SOCKET_GROUP=other"}, nil)
	if got := s.read("etc/default/tt-device-queue"); got != mine {
		t.Errorf("the settings file was rewritten:\n%s", got)
	}
	s.wantFile("opt/ttkit/bin/queued", 0o755)
	s.wantFile("opt/ttkit/share/tt-device-queue/health_check.py", 0o644)
	if unit := s.read("etc/systemd/system/queued-system.service"); !strings.Contains(unit, "\nExecStart=/opt/ttkit/bin/queued\n") {
		t.Errorf("ExecStart does not follow PREFIX:\n%s", unit)
	}
	if b, err := os.ReadFile(s.calls); err == nil {
		t.Errorf("systemctl was called under DESTDIR:\n%s", b)
	}

	// Bad input, named; nothing installed.
	other := newSystemInstall(t)
	other.run("SOCKET_GROUP=tt queue;rm").want(t, 1, nil, []string{`SOCKET_GROUP="tt queue;rm": want a group name`})
	other.run("PREFIX=usr/local").want(t, 1, nil, []string{`PREFIX="usr/local": want an absolute path`})
	if _, err := os.Stat(other.dest); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("refused runs installed something: %v", err)
	}
	// A PREFIX under a directory that others may write: root would run
	// what they put there (the unit's queued, the default health check).
	shared := newSystemInstall(t)
	if err := os.MkdirAll(filepath.Join(shared.dest, "opt", "shared"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(shared.dest, "opt", "shared"), 0o1777); err != nil {
		t.Fatal(err)
	}
	shared.run("PREFIX=/opt/shared/ttkit", "NO_BUILD=1").want(t, 1, nil,
		[]string{shared.dest + "/opt/shared is writable by others than root", "PREFIX"})
	if _, err := os.Stat(filepath.Join(shared.dest, "opt", "shared", "ttkit")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("installed under a directory others may write: %v", err)
	}
	if _, err := os.Stat(filepath.Join(shared.dest, "etc")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused run installed something: %v", err)
	}

	// A settings file others may write: its reset commands run as root.
	loose := newSystemInstall(t)
	if err := os.MkdirAll(filepath.Join(loose.dest, "etc", "default"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(loose.dest, "etc/default/tt-device-queue"), []byte("TT_DEVICE_IDS=0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(loose.dest, "etc/default/tt-device-queue"), 0o666); err != nil {
		t.Fatal(err)
	}
	loose.run("NO_BUILD=1").want(t, 1, nil, []string{loose.dest + "/etc/default/tt-device-queue is writable by others than root"})
	if _, err := os.Stat(filepath.Join(loose.dest, "usr")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused run installed something: %v", err)
	}

	// Not root: refused before anything is built or written.
	other.cred = &syscall.Credential{Uid: 65534, Gid: 65534}
	other.run().want(t, 1, nil, []string{"must run as root"})
	if _, err := os.Stat(other.dest); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a non-root run installed something: %v", err)
	}
}

// TestSystemServiceUnitVerifies asks systemd to check the system unit,
// where it can (see verifyUnit).
func TestSystemServiceUnitVerifies(t *testing.T) {
	t.Parallel()
	verifyUnit(t, "queued-system.service", "/usr/local/bin/queued")
}

// TestSystemServiceUnitSettings pins the system unit's settings that system
// mode relies on, and keeps out the sandboxing directives that every job
// would inherit (docs/system-mode.md explains each): a job must be able to
// do what its user can do in a shell.
func TestSystemServiceUnitSettings(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../../deploy/systemd/queued-system.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("not a setting: %q", line)
		}
		got[k] = append(got[k], v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"Type":                 {"exec"},
		"User":                 {"root"},
		"ExecStart":            {"/usr/local/bin/queued"},
		"EnvironmentFile":      {"-/etc/default/tt-device-queue"},
		"Environment":          {"TT_DEVICE_SOCKET=/run/tt-device-queue/queued.sock", "TT_DEVICE_LOG_DIR=/var/lib/tt-device-queue", "TT_DEVICE_STOP_TIMEOUT=90"},
		"RuntimeDirectory":     {"tt-device-queue"},
		"RuntimeDirectoryMode": {"0755"},
		"StateDirectory":       {"tt-device-queue"},
		"StateDirectoryMode":   {"0700"},
		"KillMode":             {"mixed"},
		"TimeoutStopSec":       {"90s"},
		"OOMPolicy":            {"continue"},
		"Delegate":             {"yes"},
		"LimitNOFILE":          {"65536:524288"},
		"TasksMax":             {"50%"},
		"UMask":                {"0022"},
		"KeyringMode":          {"inherit"},
		"WantedBy":             {"multi-user.target"},
	}
	for k, vs := range want {
		if strings.Join(got[k], "\n") != strings.Join(vs, "\n") {
			t.Errorf("%s=%q, want %q", k, got[k], vs)
		}
	}
	for _, k := range []string{"NoNewPrivileges", "CapabilityBoundingSet", "AmbientCapabilities", "SecureBits",
		"ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices", "DeviceAllow", "DevicePolicy", "ProtectClock",
		"ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups", "ProtectHostname",
		"ProtectProc", "ProcSubset", "PrivateNetwork", "IPAddressDeny", "RestrictAddressFamilies", "PrivateUsers",
		"PrivateIPC", "PrivateMounts", "SystemCallFilter", "SystemCallArchitectures", "MemoryDenyWriteExecute",
		"RestrictNamespaces", "RestrictRealtime", "RestrictSUIDSGID", "LockPersonality", "OOMScoreAdjust",
		"DynamicUser", "ReadOnlyPaths", "InaccessiblePaths", "TemporaryFileSystem", "RootDirectory", "RootImage"} {
		if v, ok := got[k]; ok {
			t.Errorf("%s=%q: every job would inherit it (see the unit's comments)", k, v)
		}
	}
}
