package config

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/ttkit/ttkit/queued/api"
)

// Every field of Config is a setting with a variable or a flag, or is
// decided from them (tagged kong:"-" with neither); every setting has
// help, a TT_DEVICE_ variable or a flag, names no other has, and a
// default its own reading accepts.
func TestDeclarations(t *testing.T) {
	ty := reflect.TypeFor[Config]()
	settings := map[string]bool{}
	for _, s := range Settings {
		settings[s.fieldName] = true
	}
	for i := range ty.NumField() {
		f := ty.Field(i)
		if !settings[f.Name] && f.Tag.Get("kong") != "-" {
			t.Errorf("Config.%s is neither a setting nor kong:\"-\": kong would make it a flag", f.Name)
		}
	}
	seen := map[string]bool{}
	for _, s := range Settings {
		if s.Help == "" || !strings.HasSuffix(s.Help, ".") || strings.Contains(s.Help, "${") {
			t.Errorf("%s: help %q: want a sentence, every ${name} replaced", s.name(), s.Help)
		}
		if s.Env != "" && !strings.HasPrefix(s.Env, "TT_DEVICE_") {
			t.Errorf("%s: not a TT_DEVICE_ variable", s.Env)
		}
		for _, n := range []string{s.Env, s.Flag} {
			if n != "" && seen[n] {
				t.Errorf("%s is declared twice", n)
			}
			seen[n] = true
		}
		if s.def != "" {
			if _, err := s.parse(s.def); err != nil {
				t.Errorf("%s: default %q: %v", s.name(), s.def, err)
			}
		}
		if s.SystemOnly && s.Flag != "" {
			t.Errorf("%s: a system-mode setting with a flag would escape FromEnv's check", s.Flag)
		}
	}
}

// Default is the declaration's defaults, each written once in its tag.
func TestDefaults(t *testing.T) {
	c := Default()
	v := reflect.ValueOf(c)
	for _, s := range Settings {
		if s.def != "" && s.format(v.Field(s.field)) != s.def {
			t.Errorf("Default().%s = %s, declared %s", s.fieldName, s.format(v.Field(s.field)), s.def)
		}
	}
	if c.Mode != api.UserMode || c.MaxQueued != 1000 || c.KillGrace != 60*time.Second || c.TermGrace != 15*time.Second || c.IdleTimeout != 0 || *c.ChildOOMScoreAdj != 500 ||
		c.MaxOutputBytes != 4<<30 || DefaultPort != 5741 || DefaultDevDir != "/dev/tenstorrent" || c.JobTasksMax != 0 {
		t.Fatalf("Default() = %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("the defaults are invalid: %v", err)
	}
}

// Every number a setting declares bounds for is refused just past them,
// and every value that is not one at all, with the variable and the value
// named and what is wanted.
func TestFromEnv_EveryBoundNamesVariableAndValue(t *testing.T) {
	for _, s := range Settings {
		if s.Env == "" {
			continue
		}
		var bad []string
		switch s.kind {
		case kindInt, kindBytes, kindSeconds, kindOptionalInt:
			bad = append(bad, "x", "1.5")
			if s.hasMin {
				bad = append(bad, strconv.FormatInt(s.min-1, 10))
			}
			if s.hasMax {
				bad = append(bad, strconv.FormatInt(s.max+1, 10))
			}
		case kindBool:
			bad = append(bad, "maybe")
		case kindCards:
			bad = append(bad, "0,x")
		}
		for _, val := range bad {
			e := map[string]string{"HOME": "/h", s.Env: val}
			if s.SystemOnly {
				e["TT_DEVICE_SOCKET"] = "/run/q.sock"
			}
			_, err := FromEnv(env(e))
			var ee *EnvError
			if !errors.As(err, &ee) || ee.Var != s.Env || ee.Value != val || !strings.Contains(err.Error(), s.Env+`="`+val+`": `) {
				t.Errorf("%s=%s: %v; want an error naming the variable and the value", s.Env, val, err)
			}
		}
	}
}

// The mode is decided once, from TT_DEVICE_SOCKET.
func TestFromEnv_Mode(t *testing.T) {
	c, err := FromEnv(env(map[string]string{"HOME": "/h"}))
	if err != nil || c.Mode != api.UserMode || c.Mode.System() {
		t.Fatalf("user mode: %q, %v", c.Mode, err)
	}
	c, err = FromEnv(env(map[string]string{"TT_DEVICE_SOCKET": "/run/q.sock"}))
	if err != nil || c.Mode != api.SystemMode {
		t.Fatalf("TT_DEVICE_SOCKET set: %q, %v", c.Mode, err)
	}
	c, err = FromEnv(env(map[string]string{"HOME": "/h", "TT_DEVICE_SOCKET": "  "}))
	if err != nil || c.Mode != api.UserMode {
		t.Fatalf("TT_DEVICE_SOCKET blank: %q, %v", c.Mode, err)
	}
}

// A value out of bounds that did not come through FromEnv (a flag's) is
// refused by Validate, naming the flag when the setting has one.
func TestValidate_NamesSettingAndValue(t *testing.T) {
	for _, tc := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.MaxQueued = 0 }, `--max-queued-jobs="0": want a whole number of at least 1`},
		{func(c *Config) { c.KillGrace = -time.Second }, `--kill-grace="-1": want a whole number of seconds, at least 0`},
		{func(c *Config) { c.TermGrace = -time.Second }, `--term-grace="-1": want a whole number of seconds, at least 0`},
		{func(c *Config) { c.IdleTimeout = -2 * time.Second }, `--idle-timeout="-2": want a whole number of seconds, at least 0`},
		{func(c *Config) { c.DriverPath = "proc" }, `--driver-path="proc": want an absolute path`},
		{func(c *Config) { c.DriverPath = "" }, `--driver-path="": want an absolute path`},
		{func(c *Config) { c.StateDir = "state" }, `--state-dir="state": want an absolute path`},
		{func(c *Config) { c.HTTPMaxConns = 0 }, `TT_DEVICE_HTTP_MAX_CONNS="0": want a whole number of at least 1`},
		{func(c *Config) { c.JobTasksMax = -1 }, `TT_DEVICE_JOB_TASKS_MAX="-1"`},
		{func(c *Config) { c.Port = 70000 }, `TT_DEVICE_PORT="70000": want a whole number from 0 to 65535`},
		{func(c *Config) { c.ResetCmd = "reset\x00" }, `--reset-cmd="reset\x00": contains a NUL byte`},
		{func(c *Config) { c.MaxTimeout = time.Minute }, "default timeout 3600s (TT_DEVICE_DEFAULT_TIMEOUT or --default-timeout) is above the maximum 60s (TT_DEVICE_MAX_TIMEOUT or --max-timeout)"},
	} {
		c := Default()
		tc.change(&c)
		if err := c.Validate(); err == nil || err.Error() != tc.want && !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Validate = %v, want %q", err, tc.want)
		}
	}
}

// The daemon's command line: a flag overrides what FromEnv found, a flag
// not given keeps it (kong's own reading of the process environment does
// not count: FromEnv is the one reader), and the settings without a flag
// are left alone.
func TestFlags(t *testing.T) {
	// What kong would read on its own, all of it wrong or blank.
	t.Setenv("TT_DEVICE_MAX_QUEUED_JOBS", "5")
	t.Setenv("TT_DEVICE_HTTP_WORKERS", "")
	t.Setenv("TT_DEVICE_IDS", " ")
	t.Setenv("TT_DEVICE_DEFAULT_TIMEOUT", "soon")
	t.Setenv("TT_DEVICE_WAIT_FOREIGN", "maybe")
	cfg, err := FromEnv(env(map[string]string{"HOME": "/h", "TT_DEVICE_MAX_QUEUED_JOBS": "9", "TT_DEVICE_KILL_GRACE": "0",
		"TT_DEVICE_JOB_TASKS_MAX": "64", "TT_DEVICE_DEFAULT_TIMEOUT": "60", "TT_DEVICE_IDS": "2,1"}))
	if err != nil {
		t.Fatal(err)
	}
	parse := func(args ...string) Config {
		t.Helper()
		var cmdline struct {
			Config `embed:""`
		}
		cmdline.Config = cfg
		k, err := kong.New(&cmdline, Flags(cfg)...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.Parse(args); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return cmdline.Config
	}
	c := parse()
	if c.MaxQueued != 9 || c.KillGrace != 0 || c.DefaultTimeout != time.Minute || !reflect.DeepEqual(c.Devices, []int{1, 2}) ||
		c.HTTPWorkers != 16 || c.WaitForeign || c.JobTasksMax != 64 || c.StateDir != cfg.StateDir || *c.ChildOOMScoreAdj != 500 {
		t.Fatalf("no flags: %+v, want FromEnv's %+v", c, cfg)
	}
	c = parse("--max-queued-jobs", "7", "--kill-grace", "3", "--device-ids", "0", "--wait-foreign", "--state-dir", "/srv/q", "--listen", "127.0.0.1:0")
	if c.MaxQueued != 7 || c.KillGrace != 3*time.Second || !reflect.DeepEqual(c.Devices, []int{0}) || !c.WaitForeign ||
		c.StateDir != "/srv/q" || c.Listen != "127.0.0.1:0" || c.JobTasksMax != 64 || c.DefaultTimeout != time.Minute {
		t.Fatalf("flags: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	// A flag's syntax is kong's to refuse, naming the flag and the value.
	var cmdline struct {
		Config `embed:""`
	}
	k, err := kong.New(&cmdline, Flags(cfg)...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Parse([]string{"--kill-grace", "soon"}); err == nil || !strings.Contains(err.Error(), "--kill-grace") || !strings.Contains(err.Error(), `"soon"`) {
		t.Fatalf("--kill-grace soon: %v", err)
	}
}

// The settings the environment gives are listed as given, in the
// declaration's order.
func TestGivenBy(t *testing.T) {
	got := GivenBy(env(map[string]string{"HOME": "/h", "TT_DEVICE_PORT": "80", "TT_DEVICE_IDS": " 0,1 ", "TT_DEVICE_RESET_CMD": " "}))
	if len(got) != 2 || got[0].Env != "TT_DEVICE_IDS" || got[0].Value != "0,1" || got[1].Env != "TT_DEVICE_PORT" || got[1].Value != "80" {
		t.Fatalf("GivenBy = %+v", got)
	}
}

// Each setting's default is written once in Go: a default tag only names
// a value of package defaults (or of api, which owns the wire limits),
// where the packages that fall back on it when given none (the
// scheduler's zero Options, the server's zero Config) read it too; a
// literal in a tag would be a second copy of theirs.
func TestDeclarations_DefaultsAreWrittenOnce(t *testing.T) {
	ty := reflect.TypeFor[Config]()
	names := defaultVarMap()
	for i := range ty.NumField() {
		f := ty.Field(i)
		tag, ok := f.Tag.Lookup("default")
		if !ok {
			continue
		}
		name, isVar := strings.CutPrefix(tag, "${")
		name, closed := strings.CutSuffix(name, "}")
		if !isVar || !closed || names[name] == "" {
			t.Errorf("Config.%s (%s): default %q is written here; name a value of package defaults as ${Name}", f.Name, f.Tag.Get("env"), tag)
		}
	}
}
