package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) Lookup {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestFromEnv_Defaults(t *testing.T) {
	c, err := FromEnv(env(map[string]string{"HOME": "/home/u"}))
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.StateDir = "/home/u/.local/state/tt-device-queue/logs-v2"
	if c.StateDir != want.StateDir || c.MaxQueued != 1000 || c.MaxLogBytes != 16<<20 || c.HTTPWorkers != 16 ||
		c.DefaultTimeout != time.Hour || c.MaxTimeout != 24*time.Hour || c.Devices != nil || c.Port != 5741 {
		t.Fatalf("defaults = %+v", c)
	}
}

func TestFromEnv_Overrides(t *testing.T) {
	c, err := FromEnv(env(map[string]string{
		"TT_DEVICE_IDS": "1, 0", "TT_DEVICE_MAX_QUEUED_JOBS": "5", "TT_DEVICE_DEFAULT_TIMEOUT": "10",
		"TT_DEVICE_LOG_DIR": "/srv/q", "TT_DEVICE_MAX_LOG_BYTES": "4096", "TT_DEVICE_PORT": "0", "TT_DEVICE_JOB_TASKS_MAX": "512",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Devices) != 2 || c.Devices[0] != 0 || c.MaxQueued != 5 || c.DefaultTimeout != 10*time.Second ||
		c.StateDir != "/srv/q" || c.MaxLogBytes != 4096 || c.Port != 0 || c.JobTasksMax != 512 {
		t.Fatalf("config = %+v", c)
	}
	c, err = FromEnv(env(map[string]string{"XDG_STATE_HOME": "/x"}))
	if err != nil || c.StateDir != "/x/tt-device-queue/logs-v2" {
		t.Fatalf("XDG state dir = %q, %v", c.StateDir, err)
	}
}

func TestFromEnv_ErrorsNameVariableAndValue(t *testing.T) {
	for name, val := range map[string]string{
		"TT_DEVICE_IDS":               "0,x",
		"TT_DEVICE_MAX_TIMEOUT":       "abc",
		"TT_DEVICE_HTTP_WORKERS":      "0",
		"TT_DEVICE_MAX_LOG_BYTES":     "-1",
		"TT_DEVICE_RETENTION_DAYS":    "1.5",
		"TT_DEVICE_LOG_DIR":           "relative/dir",
		"TT_DEVICE_DEFAULT_TIMEOUT":   "-5",
		"TT_DEVICE_MAX_REQUEST_BYTES": "1e6",
		"TT_DEVICE_JOB_TASKS_MAX":     "0",
	} {
		_, err := FromEnv(env(map[string]string{"HOME": "/h", name: val}))
		var ee *EnvError
		if !errors.As(err, &ee) || ee.Var != name || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), val) {
			t.Errorf("%s=%s: error %v does not name the variable and value", name, val, err)
		}
	}
	_, err := FromEnv(env(map[string]string{"HOME": "/h", "TT_DEVICE_DEFAULT_TIMEOUT": "100", "TT_DEVICE_MAX_TIMEOUT": "50"}))
	if err == nil || !strings.Contains(err.Error(), "TT_DEVICE_MAX_TIMEOUT") {
		t.Errorf("default above max: %v", err)
	}
	if _, err := FromEnv(env(map[string]string{})); err == nil || !strings.Contains(err.Error(), "TT_DEVICE_LOG_DIR") {
		t.Errorf("no HOME: %v", err)
	}
}

func TestParseDevices(t *testing.T) {
	for _, bad := range []string{"", "0,0", "-1", "a", "01", "0,,1"} {
		if _, err := ParseDevices(bad); err == nil {
			t.Errorf("ParseDevices(%q) accepted", bad)
		}
	}
	ids, err := ParseDevices("3,1")
	if err != nil || len(ids) != 2 || ids[0] != 1 || ids[1] != 3 {
		t.Errorf("ParseDevices(3,1) = %v, %v", ids, err)
	}
}

func TestDiscover(t *testing.T) {
	dir := t.TempDir()
	if _, err := Discover(filepath.Join(dir, "missing")); !errors.Is(err, ErrNoDevices) || !strings.Contains(err.Error(), "TT_DEVICE_IDS") {
		t.Fatalf("missing dir: %v", err)
	}
	for _, n := range []string{"1", "0", "by-id", "10"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := Discover(dir)
	if err != nil || len(ids) != 3 || ids[0] != 0 || ids[2] != 10 {
		t.Fatalf("Discover = %v, %v", ids, err)
	}
}

func TestFromEnv_ResetSettings(t *testing.T) {
	c, err := FromEnv(env(map[string]string{"HOME": "/h"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.ResetCmd != DefaultResetCmd || c.HealthCheckCmd != "" || c.DeepResetCmd != "" || c.ResetTimeout != 300*time.Second ||
		c.HealthCheckTimeout != 120*time.Second || c.DeepResetTimeout != 300*time.Second || c.DriverPath != DefaultDriverPath || c.WaitForeign {
		t.Fatalf("reset defaults = %+v", c)
	}
	c, err = FromEnv(env(map[string]string{"HOME": "/h",
		"TT_DEVICE_RESET_CMD": "my-reset", "TT_DEVICE_HEALTH_CHECK_CMD": "check {device}", "TT_DEVICE_DEEP_RESET_CMD": "deep",
		"TT_DEVICE_RESET_TIMEOUT": "5", "TT_DEVICE_HEALTH_CHECK_TIMEOUT": "6", "TT_DEVICE_DEEP_RESET_TIMEOUT": "7",
		"TT_DEVICE_DRIVER_PATH": "/tmp/kmd/", "TT_DEVICE_WAIT_FOREIGN": "1",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.ResetCmd != "my-reset" || c.HealthCheckCmd != "check {device}" || c.DeepResetCmd != "deep" || c.ResetTimeout != 5*time.Second ||
		c.HealthCheckTimeout != 6*time.Second || c.DeepResetTimeout != 7*time.Second || c.DriverPath != "/tmp/kmd" || !c.WaitForeign {
		t.Fatalf("reset overrides = %+v", c)
	}
	for name, val := range map[string]string{
		"TT_DEVICE_WAIT_FOREIGN": "maybe", "TT_DEVICE_DRIVER_PATH": "proc/driver", "TT_DEVICE_RESET_TIMEOUT": "0",
		"TT_DEVICE_HEALTH_CHECK_TIMEOUT": "x",
	} {
		_, err := FromEnv(env(map[string]string{"HOME": "/h", name: val}))
		var ee *EnvError
		if !errors.As(err, &ee) || ee.Var != name {
			t.Errorf("%s=%s: %v", name, val, err)
		}
	}
}

func TestHealthCheckScript(t *testing.T) {
	prefix := t.TempDir()
	exe := filepath.Join(prefix, "bin", "queued")
	share := filepath.Join(prefix, "share", "tt-device-queue", HealthCheckScriptName)
	if p, found := HealthCheckScript(exe); found || p != share {
		t.Fatalf("nothing installed: %q, %v; want %q, false", p, found, share)
	}
	beside := filepath.Join(prefix, "bin", HealthCheckScriptName)
	for _, p := range []string{beside, share} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if got, found := HealthCheckScript(exe); !found || got != p {
			t.Fatalf("with %s: %q, %v", p, got, found)
		}
	}
	if got := DefaultHealthCheckCmd("/opt/q/share/health_check.py"); got != "~/tenstorrent/.venv/bin/python3 /opt/q/share/health_check.py {device}" {
		t.Fatalf("command = %q", got)
	}
	if got := DefaultHealthCheckCmd("/my dir/it's.py"); got != `~/tenstorrent/.venv/bin/python3 '/my dir/it'\''s.py' {device}` {
		t.Fatalf("quoted command = %q", got)
	}
}

// TestFromEnv_ResourceBounds covers the bounds on connections, answer
// writes and kept output: their defaults, an override, and bad values.
func TestFromEnv_ResourceBounds(t *testing.T) {
	c, err := FromEnv(env(map[string]string{"HOME": "/h"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPMaxConns != 256 || c.HTTPWriteTimeout != 30*time.Second || c.MaxOutputBytes != 4<<30 {
		t.Fatalf("defaults: max conns %d, write timeout %v, output budget %d", c.HTTPMaxConns, c.HTTPWriteTimeout, c.MaxOutputBytes)
	}
	c, err = FromEnv(env(map[string]string{"HOME": "/h", "TT_DEVICE_HTTP_MAX_CONNS": "8",
		"TT_DEVICE_HTTP_WRITE_TIMEOUT": "5", "TT_DEVICE_MAX_OUTPUT_BYTES": "1048576", "TT_DEVICE_MAX_LOG_BYTES": "65536"}))
	if err != nil || c.HTTPMaxConns != 8 || c.HTTPWriteTimeout != 5*time.Second || c.MaxOutputBytes != 1<<20 {
		t.Fatalf("overrides: %+v, %v", c, err)
	}
	for name, val := range map[string]string{
		"TT_DEVICE_HTTP_MAX_CONNS":     "0",
		"TT_DEVICE_HTTP_WRITE_TIMEOUT": "0",
		"TT_DEVICE_MAX_OUTPUT_BYTES":   "4G",
	} {
		_, err := FromEnv(env(map[string]string{"HOME": "/h", name: val}))
		var ee *EnvError
		if !errors.As(err, &ee) || ee.Var != name || !strings.Contains(err.Error(), val) {
			t.Errorf("%s=%s: error %v does not name the variable and value", name, val, err)
		}
	}
	// Kept output below one job's cap would delete every finished job's
	// output at once.
	_, err = FromEnv(env(map[string]string{"HOME": "/h", "TT_DEVICE_MAX_OUTPUT_BYTES": "1000", "TT_DEVICE_MAX_LOG_BYTES": "4096"}))
	if err == nil || !strings.Contains(err.Error(), "TT_DEVICE_MAX_OUTPUT_BYTES") || !strings.Contains(err.Error(), "TT_DEVICE_MAX_LOG_BYTES") {
		t.Errorf("budget below one job's cap: %v", err)
	}
}

// TT_DEVICE_SOCKET turns system mode on: the state directory moves to
// /var/lib unless given, TCP stays off unless TT_DEVICE_PORT is set, and
// the groups and the reset user are read as given.
func TestFromEnv_SystemMode(t *testing.T) {
	c, err := FromEnv(env(map[string]string{"HOME": "/root", "TT_DEVICE_SOCKET": "/run/tt-device-queue/queued.sock",
		"TT_DEVICE_SOCKET_GROUP": "ttq", "TT_DEVICE_ADMIN_GROUP": "ttadmin", "TT_DEVICE_RESET_USER": "ttops"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Socket != "/run/tt-device-queue/queued.sock" || c.SocketGroup != "ttq" || c.AdminGroup != "ttadmin" ||
		c.ResetUser != "ttops" || c.StateDir != DefaultSystemStateDir || c.PortSet {
		t.Fatalf("system config = %+v", c)
	}
	c, err = FromEnv(env(map[string]string{"HOME": "/root", "TT_DEVICE_SOCKET": "/run/q.sock", "TT_DEVICE_LOG_DIR": "/srv/q", "TT_DEVICE_PORT": "5741"}))
	if err != nil || c.StateDir != "/srv/q" || !c.PortSet {
		t.Fatalf("state dir %q port set %v, %v", c.StateDir, c.PortSet, err)
	}
	_, err = FromEnv(env(map[string]string{"TT_DEVICE_SOCKET": "/run/q.sock", "TT_DEVICE_LOG_DIR": "relative/state"}))
	if ee := (*EnvError)(nil); !errors.As(err, &ee) || ee.Var != "TT_DEVICE_LOG_DIR" {
		t.Errorf("system mode with a relative state directory: %v", err)
	}
	c, err = FromEnv(env(map[string]string{"TT_DEVICE_SOCKET": "/run/q.sock"}))
	if err != nil || c.StateDir != DefaultSystemStateDir {
		t.Errorf("system mode without HOME: %q, %v", c.StateDir, err)
	}
	c, err = FromEnv(env(map[string]string{"HOME": "/h"}))
	if err != nil || c.Socket != "" || c.PortSet {
		t.Fatalf("user mode: %+v, %v", c, err)
	}
	for val, why := range map[string]string{
		"run/q.sock":                       "absolute",
		"/run/" + strings.Repeat("s", 110): "bytes",
		"/run/q.sock\x00":                  "NUL",
	} {
		_, err := FromEnv(env(map[string]string{"HOME": "/h", "TT_DEVICE_SOCKET": val}))
		var ee *EnvError
		if !errors.As(err, &ee) || ee.Var != "TT_DEVICE_SOCKET" || !strings.Contains(err.Error(), why) {
			t.Errorf("TT_DEVICE_SOCKET=%q: %v, want an error about %s", val, err, why)
		}
	}
	for _, name := range []string{"TT_DEVICE_SOCKET_GROUP", "TT_DEVICE_ADMIN_GROUP", "TT_DEVICE_RESET_USER"} {
		_, err := FromEnv(env(map[string]string{"HOME": "/h", name: "ttq"}))
		var ee *EnvError
		if !errors.As(err, &ee) || ee.Var != name || !strings.Contains(err.Error(), "TT_DEVICE_SOCKET") {
			t.Errorf("%s without TT_DEVICE_SOCKET: %v, want an error saying it needs system mode", name, err)
		}
		_, err = FromEnv(env(map[string]string{"HOME": "/h", "TT_DEVICE_SOCKET": "/run/q.sock", name: "bad:name"}))
		if !errors.As(err, &ee) || ee.Var != name || !strings.Contains(err.Error(), "bad:name") {
			t.Errorf("%s=bad:name: %v", name, err)
		}
	}
}

// TestShares: each per-user bound is a quarter of its total unless given
// (the long-polls half of the connections); a bound above its total, or a
// user's output below one job's, is refused naming both settings; only
// system mode reads them.
func TestShares(t *testing.T) {
	sys := func(extra map[string]string) map[string]string {
		m := map[string]string{"HOME": "/h", "TT_DEVICE_SOCKET": "/run/q.sock"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	c, err := FromEnv(env(sys(nil)))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Shares(), (Shares{Queued: 250, Completed: 2500, OutputBytes: 1 << 30, Conns: 64, Workers: 4, Waits: 32}); got != want {
		t.Fatalf("default shares %+v, want %+v", got, want)
	}
	c, err = FromEnv(env(sys(map[string]string{"TT_DEVICE_MAX_QUEUED_JOBS": "40", "TT_DEVICE_HTTP_MAX_CONNS_PER_USER": "10",
		"TT_DEVICE_MAX_OUTPUT_BYTES": "20000000", "TT_DEVICE_MAX_LOG_BYTES": "10000000", "TT_DEVICE_MAX_COMPLETED_JOBS": "100"})))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Shares(), (Shares{Queued: 10, Completed: 25, OutputBytes: 10000000, Conns: 10, Workers: 4, Waits: 5}); got != want {
		t.Fatalf("shares %+v, want %+v", got, want)
	}
	for _, tc := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"TT_DEVICE_MAX_QUEUED_PER_USER": "2000"}, []string{"TT_DEVICE_MAX_QUEUED_PER_USER", "2000", "TT_DEVICE_MAX_QUEUED_JOBS", "1000"}},
		{map[string]string{"TT_DEVICE_MAX_COMPLETED_JOBS_PER_USER": "20000"}, []string{"TT_DEVICE_MAX_COMPLETED_JOBS_PER_USER", "20000", "TT_DEVICE_MAX_COMPLETED_JOBS", "10000"}},
		{map[string]string{"TT_DEVICE_HTTP_WAITS_PER_USER": "100"}, []string{"TT_DEVICE_HTTP_WAITS_PER_USER", "TT_DEVICE_HTTP_MAX_CONNS_PER_USER", "64"}},
		{map[string]string{"TT_DEVICE_MAX_OUTPUT_BYTES_PER_USER": "1000"}, []string{"TT_DEVICE_MAX_OUTPUT_BYTES_PER_USER", "TT_DEVICE_MAX_LOG_BYTES"}},
	} {
		_, err := FromEnv(env(sys(tc.env)))
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %v; want an error naming %s", tc.env, err, w)
			}
		}
	}
	_, err = FromEnv(env(map[string]string{"HOME": "/h", "TT_DEVICE_MAX_QUEUED_PER_USER": "5"}))
	var ee *EnvError
	if !errors.As(err, &ee) || ee.Var != "TT_DEVICE_MAX_QUEUED_PER_USER" || !strings.Contains(err.Error(), "TT_DEVICE_SOCKET") {
		t.Errorf("a per-user bound in user mode: %v, want it refused as system mode's", err)
	}
}

// TestFromEnv_LoginShell: TT_DEVICE_LOGIN_SHELL is off by default, on
// with 1, and a value that is not a yes or no is refused by name.
func TestFromEnv_LoginShell(t *testing.T) {
	c, err := FromEnv(env(map[string]string{"HOME": "/h"}))
	if err != nil || c.LoginShell {
		t.Fatalf("default: LoginShell %v, %v; want off", c.LoginShell, err)
	}
	c, err = FromEnv(env(map[string]string{"HOME": "/h", "TT_DEVICE_LOGIN_SHELL": "1"}))
	if err != nil || !c.LoginShell {
		t.Fatalf("TT_DEVICE_LOGIN_SHELL=1: LoginShell %v, %v; want on", c.LoginShell, err)
	}
	_, err = FromEnv(env(map[string]string{"HOME": "/h", "TT_DEVICE_LOGIN_SHELL": "maybe"}))
	var ee *EnvError
	if !errors.As(err, &ee) || ee.Var != "TT_DEVICE_LOGIN_SHELL" || !strings.Contains(err.Error(), "maybe") {
		t.Fatalf("TT_DEVICE_LOGIN_SHELL=maybe: %v; want an error naming it", err)
	}
}
