// Package config holds queued's settings: their defaults, the environment
// variables that set them (the seed's table plus a few of our own), and the
// discovery of cards and of the state directory that the daemon and the CLI
// share, so both find the same token, address and store without being told.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

// DefaultPort is the loopback TCP port the seed assigns to the service.
const DefaultPort = 5741

// DefaultDevDir is where the kernel driver creates one node per card.
const DefaultDevDir = "/dev/tenstorrent"

// Config is the daemon's complete configuration after defaults, environment
// and flags have been applied. Durations are whole seconds on the wire.
type Config struct {
	// Devices lists the card numbers that get a queue, ascending. Nil until
	// TT_DEVICE_IDS sets it or Discover fills it from DefaultDevDir.
	Devices []int
	// StateDir holds the bbolt file, the token, the address file and one
	// output file per job.
	StateDir string
	// Port is the loopback port the daemon listens on and the client dials.
	Port int
	// DefaultTimeout applies to a job submitted with timeout 0 or none.
	DefaultTimeout time.Duration
	// MaxTimeout is the largest timeout a submission may ask for.
	MaxTimeout time.Duration
	// MaxQueued bounds the number of queued (not yet running) jobs over all cards.
	MaxQueued int
	// MaxLogBytes caps each job's output file; the rest is drained and dropped.
	MaxLogBytes int64
	// ResultBytes is how much output the CLI's result command prints.
	ResultBytes int64
	// MaxRequestBytes bounds an HTTP request body.
	MaxRequestBytes int64
	// HTTPWorkers bounds the handlers doing work at once.
	HTTPWorkers int
	// HTTPMaxConns bounds the open HTTP connections, so idle or slow
	// clients cannot use up the daemon's file descriptors.
	HTTPMaxConns int
	// HTTPWriteTimeout bounds writing one answer, from its first byte, so
	// a client that stops reading lets go of its connection.
	HTTPWriteTimeout time.Duration
	// MaxOutputBytes bounds the output files of all kept jobs together;
	// the oldest finished jobs' output is deleted first.
	MaxOutputBytes int64
	// RetentionDays is how long finished jobs are kept.
	RetentionDays int
	// MaxCompleted is how many finished jobs are kept at most.
	MaxCompleted int
	// KillGrace is the time between SIGINT and SIGKILL when a job is
	// stopped; 0 sends SIGKILL right after SIGINT.
	KillGrace time.Duration
	// JobTasksMax caps each job at that many processes and threads
	// (pids.max of its cgroup, where jobs get cgroups of their own); 0
	// leaves them unlimited.
	JobTasksMax int
	// ChildOOMScoreAdj is every job's oom_score_adj, set before the job
	// runs (so its user cannot lower it): the kernel's OOM killer takes a
	// job before queued. Nil leaves jobs queued's own.
	ChildOOMScoreAdj *int
	// StopTimeout is how long the service manager waits after SIGTERM
	// before it kills queued (systemd's TimeoutStopSec); queued warns at
	// start when the kill grace leaves too little of it to record how the
	// jobs ended.
	StopTimeout time.Duration

	// ResetCmd, HealthCheckCmd and DeepResetCmd are the control commands a
	// reset runs, as shell programs with {device} substituted (a reset
	// command without it gets the card number appended). An empty
	// HealthCheckCmd means DefaultHealthCheckCmd with the installed
	// health_check.py (see HealthCheckScript); an empty DeepResetCmd means
	// no deep reset.
	ResetCmd, HealthCheckCmd, DeepResetCmd string
	// ResetTimeout, HealthCheckTimeout and DeepResetTimeout bound each run
	// of their command.
	ResetTimeout, HealthCheckTimeout, DeepResetTimeout time.Duration
	// DriverPath is the KMD directory whose <card>/pids files name the
	// processes holding each card.
	DriverPath string
	// WaitForeign makes a card start no job while a process outside the
	// queue holds it.
	WaitForeign bool

	// Socket (TT_DEVICE_SOCKET) turns system mode on: queued, as root,
	// serves every user of the host on this Unix socket, takes each
	// caller's identity from the kernel and runs each job as its
	// submitter. Empty is user mode, the default.
	Socket string
	// SocketGroup (TT_DEVICE_SOCKET_GROUP) is the group allowed to
	// connect to Socket (mode 0660); empty lets every user (0666).
	SocketGroup string
	// AdminGroup (TT_DEVICE_ADMIN_GROUP) names the group whose members may,
	// like root, see and stop every user's jobs and interrupt them with a
	// reset.
	AdminGroup string
	// ResetUser (TT_DEVICE_RESET_USER) is the user resets and health
	// checks run as in system mode; empty is root.
	ResetUser string
	// PortSet says TT_DEVICE_PORT was given: system mode listens on TCP
	// only then (or with --listen).
	PortSet bool
}

// DefaultChildOOMScoreAdj is the Python tool's oom_score_adj for jobs.
const DefaultChildOOMScoreAdj = 500

// DefaultResetCmd resets one card by its device node. --no_reinit keeps
// tt-smi from reinitializing (and so touching) every card afterwards.
const DefaultResetCmd = "~/tenstorrent/.venv/bin/tt-smi -r /dev/tenstorrent/{device} --no_reinit"

// DefaultDriverPath is where the KMD lists each card's holders.
const DefaultDriverPath = "/proc/driver/tenstorrent"

// HealthCheckScriptName is the health check shipped with queued.
const HealthCheckScriptName = "health_check.py"

// HealthCheckScript finds the installed health_check.py for the queued
// executable at exe: <exe dir>/../share/tt-device-queue/health_check.py (an
// installed prefix), else <exe dir>/health_check.py (a build directory).
// found is false when neither exists; path is then the first, so the
// error a reset reports names where the script was expected.
func HealthCheckScript(exe string) (path string, found bool) {
	dir := filepath.Dir(exe)
	candidates := []string{
		filepath.Join(dir, "..", "share", "tt-device-queue", HealthCheckScriptName),
		filepath.Join(dir, HealthCheckScriptName),
	}
	for _, p := range candidates {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return filepath.Clean(p), true
		}
	}
	return filepath.Clean(candidates[0]), false
}

// DefaultHealthCheckCmd runs script with the Python of ~/tenstorrent/.venv
// (where tt_umd is installed) on one card.
func DefaultHealthCheckCmd(script string) string {
	return "~/tenstorrent/.venv/bin/python3 " + shellQuote(script) + " {device}"
}

// shellQuote quotes s for bash unless it needs no quoting.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Setting documents one environment variable: the settings table of docs/operations.md
// and `queued --help` are both generated from this list, so they cannot
// drift from what FromEnv reads.
type Setting struct {
	// Env is the variable's name.
	Env string
	// Default is the human-readable default.
	Default string
	// Help says what the variable sets, in one sentence.
	Help string
}

// Settings lists every variable FromEnv reads, in the seed's table order
// followed by the ones queued adds.
var Settings = []Setting{
	{"TT_DEVICE_IDS", "numeric nodes under /dev/tenstorrent", "Comma-separated card numbers that get a queue."},
	{"TT_DEVICE_DEFAULT_TIMEOUT", "3600", "Seconds a job may run, every repeat together, when it asks for no timeout."},
	{"TT_DEVICE_MAX_TIMEOUT", "86400", "Largest timeout in seconds a job may ask for."},
	{"TT_DEVICE_MAX_QUEUED_JOBS", "1000", "Queued jobs allowed over all cards; more are refused with 429."},
	{"TT_DEVICE_MAX_LOG_BYTES", "16777216", "Bytes of output kept per job: past it the first and the last half are kept (the tail in memory while the job runs) and the middle is cut and counted."},
	{"TT_DEVICE_RESULT_BYTES", "1048576", "Bytes of output the CLI's result command prints."},
	{"TT_DEVICE_MAX_REQUEST_BYTES", "1048576", "Largest HTTP request body; larger ones get 413."},
	{"TT_DEVICE_HTTP_WORKERS", "16", "HTTP handlers working at once; long-poll waits and writing answers do not count."},
	{"TT_DEVICE_HTTP_MAX_CONNS", "256", "Open HTTP connections at most; at the bound a new one closes the one idle or slow to send its request the longest, or gets 503 when all are busy."},
	{"TT_DEVICE_HTTP_WRITE_TIMEOUT", "30", "Seconds an HTTP answer may take to be written from its first byte; a client that stops reading is disconnected."},
	{"TT_DEVICE_MAX_OUTPUT_BYTES", "4294967296", "Bytes of output kept over all jobs; beyond it the oldest finished jobs' output is deleted (their records stay)."},
	{"TT_DEVICE_RETENTION_DAYS", "30", "Days finished jobs and their output are kept."},
	{"TT_DEVICE_MAX_COMPLETED_JOBS", "10000", "Finished jobs kept at most; older ones are deleted first."},
	{"TT_DEVICE_LOG_DIR", "${XDG_STATE_HOME:-~/.local/state}/tt-device-queue/logs-v2", "State directory: store, token, job output."},
	{"TT_DEVICE_PORT", "5741", "Loopback port the daemon listens on and the CLI connects to."},
	{"TT_DEVICE_KILL_GRACE", "10", "Seconds between SIGINT and SIGKILL when a job is killed, a reset interrupts it or the service stops; 0 sends SIGKILL at once."},
	{"TT_DEVICE_STOP_TIMEOUT", "45", "Seconds the service manager waits after SIGTERM (the unit's TimeoutStopSec); queued warns when the kill grace does not fit in it."},
	{"TT_DEVICE_RESET_CMD", DefaultResetCmd, "Shell command that resets one card; {device} is the card number, appended when absent."},
	{"TT_DEVICE_HEALTH_CHECK_CMD", "~/tenstorrent/.venv/bin/python3 <prefix>/share/tt-device-queue/" + HealthCheckScriptName + " {device}", "Shell command that must exit 0 when one card works after a reset; {device} is the card number."},
	{"TT_DEVICE_DEEP_RESET_CMD", "none", "Shell command tried once when reset or health check fails, followed by the health check; {device} as for the reset."},
	{"TT_DEVICE_RESET_TIMEOUT", "300", "Seconds the reset command may run."},
	{"TT_DEVICE_HEALTH_CHECK_TIMEOUT", "120", "Seconds each run of the health check may take."},
	{"TT_DEVICE_DEEP_RESET_TIMEOUT", "300", "Seconds the deep reset command may run."},
	{"TT_DEVICE_DRIVER_PATH", DefaultDriverPath, "KMD directory whose <card>/pids files list the processes holding each card."},
	{"TT_DEVICE_WAIT_FOREIGN", "0", "1: a card starts no job while a process outside the queue holds it."},
	{"TT_DEVICE_CHILD_OOM_SCORE_ADJ", strconv.Itoa(DefaultChildOOMScoreAdj), "Each job's oom_score_adj (-1000 to 1000, or none to keep queued's), set before it runs: the kernel's OOM killer takes a job before queued, as with the Python tool."},
	{"TT_DEVICE_JOB_TASKS_MAX", "none", "Processes and threads one job may have (pids.max of its cgroup; needs Delegate=yes): on a shared host, one job's fork bomb then cannot take what queued and the other jobs need."},
	{"TT_DEVICE_SOCKET", "none (user mode)", "System mode: as root, serve every user of the host on this Unix socket (the shipped unit: " + api.SystemSocket + ", where the CLI looks), each job run as its submitter; TCP is off unless TT_DEVICE_PORT or --listen is given, and the state directory defaults to " + DefaultSystemStateDir + "."},
	{"TT_DEVICE_SOCKET_GROUP", "none: every user may connect", "System mode: only this group's members may connect to the socket (mode 0660)."},
	{"TT_DEVICE_ADMIN_GROUP", "none: root only", "System mode: members of this group, like root, may see and kill every user's jobs, and their resets interrupt any job."},
	{"TT_DEVICE_RESET_USER", "root", "System mode: the user resets and health checks run as, in its home directory."},
}

// Default returns the configuration with every default applied and no
// devices (they come from the environment or from Discover).
func Default() Config {
	return Config{
		Port:             DefaultPort,
		DefaultTimeout:   3600 * time.Second,
		MaxTimeout:       86400 * time.Second,
		MaxQueued:        1000,
		MaxLogBytes:      16 << 20,
		ResultBytes:      1 << 20,
		MaxRequestBytes:  1 << 20,
		HTTPWorkers:      16,
		HTTPMaxConns:     256,
		MaxOutputBytes:   4 << 30,
		HTTPWriteTimeout: 30 * time.Second,
		RetentionDays:    30,
		MaxCompleted:     10000,
		KillGrace:        10 * time.Second,
		StopTimeout:      45 * time.Second,
		ChildOOMScoreAdj: ptr(DefaultChildOOMScoreAdj),

		ResetCmd:           DefaultResetCmd,
		ResetTimeout:       300 * time.Second,
		HealthCheckTimeout: 120 * time.Second,
		DeepResetTimeout:   300 * time.Second,
		DriverPath:         DefaultDriverPath,
	}
}

func ptr[T any](v T) *T { return &v }

// EnvError is a variable whose value cannot be used. Its message names the
// variable and quotes the value, so the operator can fix it at once.
type EnvError struct {
	Var, Value, Reason string
}

func (e *EnvError) Error() string {
	return fmt.Sprintf("%s=%q: %s", e.Var, e.Value, e.Reason)
}

// ErrNoDevices means no card was named and none was found; the message says
// how to name them.
var ErrNoDevices = errors.New("no Tenstorrent cards found; set TT_DEVICE_IDS (for example TT_DEVICE_IDS=0,1) to name the cards to queue for")

// Lookup reads one environment variable; os.LookupEnv fits.
type Lookup func(name string) (string, bool)

// FromEnv applies the environment to the defaults. Unset or empty variables
// keep their defaults; the first unusable value is returned as an *EnvError.
// The state directory is resolved (see StateDir) but not created.
func FromEnv(lookup Lookup) (Config, error) {
	c := Default()
	get := func(name string) (string, bool) {
		v, ok := lookup(name)
		v = strings.TrimSpace(v)
		return v, ok && v != ""
	}
	if v, ok := get("TT_DEVICE_IDS"); ok {
		ids, err := ParseDevices(v)
		if err != nil {
			return c, &EnvError{"TT_DEVICE_IDS", v, err.Error()}
		}
		c.Devices = ids
	}
	ints := []struct {
		name string
		dst  *int
		min  int
	}{
		{"TT_DEVICE_MAX_QUEUED_JOBS", &c.MaxQueued, 1},
		{"TT_DEVICE_HTTP_WORKERS", &c.HTTPWorkers, 1},
		{"TT_DEVICE_HTTP_MAX_CONNS", &c.HTTPMaxConns, 1},
		{"TT_DEVICE_RETENTION_DAYS", &c.RetentionDays, 1},
		{"TT_DEVICE_MAX_COMPLETED_JOBS", &c.MaxCompleted, 1},
		{"TT_DEVICE_PORT", &c.Port, 0},
		{"TT_DEVICE_JOB_TASKS_MAX", &c.JobTasksMax, 1},
	}
	for _, f := range ints {
		if v, ok := get(f.name); ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < f.min {
				return c, &EnvError{f.name, v, fmt.Sprintf("want a whole number of at least %d", f.min)}
			}
			*f.dst = n
		}
	}
	bytes := []struct {
		name string
		dst  *int64
	}{
		{"TT_DEVICE_MAX_LOG_BYTES", &c.MaxLogBytes},
		{"TT_DEVICE_RESULT_BYTES", &c.ResultBytes},
		{"TT_DEVICE_MAX_REQUEST_BYTES", &c.MaxRequestBytes},
		{"TT_DEVICE_MAX_OUTPUT_BYTES", &c.MaxOutputBytes},
	}
	for _, f := range bytes {
		if v, ok := get(f.name); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 {
				return c, &EnvError{f.name, v, "want a whole number of bytes, at least 1"}
			}
			*f.dst = n
		}
	}
	secs := []struct {
		name string
		dst  *time.Duration
		min  int64
	}{
		{"TT_DEVICE_DEFAULT_TIMEOUT", &c.DefaultTimeout, 1},
		{"TT_DEVICE_MAX_TIMEOUT", &c.MaxTimeout, 1},
		{"TT_DEVICE_KILL_GRACE", &c.KillGrace, 0},
		{"TT_DEVICE_STOP_TIMEOUT", &c.StopTimeout, 1},
		{"TT_DEVICE_HTTP_WRITE_TIMEOUT", &c.HTTPWriteTimeout, 1},
		{"TT_DEVICE_RESET_TIMEOUT", &c.ResetTimeout, 1},
		{"TT_DEVICE_HEALTH_CHECK_TIMEOUT", &c.HealthCheckTimeout, 1},
		{"TT_DEVICE_DEEP_RESET_TIMEOUT", &c.DeepResetTimeout, 1},
	}
	for _, f := range secs {
		if v, ok := get(f.name); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < f.min || n > 10*365*86400 {
				return c, &EnvError{f.name, v, fmt.Sprintf("want a whole number of seconds, at least %d", f.min)}
			}
			*f.dst = time.Duration(n) * time.Second
		}
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{
		{"TT_DEVICE_RESET_CMD", &c.ResetCmd},
		{"TT_DEVICE_HEALTH_CHECK_CMD", &c.HealthCheckCmd},
		{"TT_DEVICE_DEEP_RESET_CMD", &c.DeepResetCmd},
	} {
		if v, ok := get(f.name); ok {
			if strings.ContainsRune(v, 0) {
				return c, &EnvError{f.name, v, "contains a NUL byte"}
			}
			*f.dst = v
		}
	}
	if v, ok := get("TT_DEVICE_DRIVER_PATH"); ok {
		if !filepath.IsAbs(v) {
			return c, &EnvError{"TT_DEVICE_DRIVER_PATH", v, "want an absolute path"}
		}
		c.DriverPath = filepath.Clean(v)
	}
	if v, ok := get("TT_DEVICE_CHILD_OOM_SCORE_ADJ"); ok {
		if v == "none" {
			c.ChildOOMScoreAdj = nil
		} else if n, err := strconv.Atoi(v); err != nil || n < -1000 || n > 1000 {
			return c, &EnvError{"TT_DEVICE_CHILD_OOM_SCORE_ADJ", v, "want a whole number from -1000 to 1000, or none"}
		} else {
			c.ChildOOMScoreAdj = &n
		}
	}
	if v, ok := get("TT_DEVICE_WAIT_FOREIGN"); ok {
		switch v {
		case "1", "true", "yes":
			c.WaitForeign = true
		case "0", "false", "no":
			c.WaitForeign = false
		default:
			return c, &EnvError{"TT_DEVICE_WAIT_FOREIGN", v, "want 1 or 0"}
		}
	}
	if err := c.systemFromEnv(get); err != nil {
		return c, err
	}
	_, c.PortSet = get("TT_DEVICE_PORT")
	if _, set := get("TT_DEVICE_LOG_DIR"); c.Socket != "" && !set {
		c.StateDir = DefaultSystemStateDir // root's, not a user's home
	} else {
		dir, err := StateDir(lookup)
		if err != nil {
			return c, err
		}
		c.StateDir = dir
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, nil
}

// Validate checks the relations between settings that no single variable
// can break on its own.
func (c Config) Validate() error {
	if c.DefaultTimeout > c.MaxTimeout {
		return fmt.Errorf("default timeout %ds (TT_DEVICE_DEFAULT_TIMEOUT) is above the maximum %ds (TT_DEVICE_MAX_TIMEOUT)",
			int64(c.DefaultTimeout/time.Second), int64(c.MaxTimeout/time.Second))
	}
	if c.MaxOutputBytes < c.MaxLogBytes {
		return fmt.Errorf("kept output %d bytes (TT_DEVICE_MAX_OUTPUT_BYTES) is below one job's output %d bytes (TT_DEVICE_MAX_LOG_BYTES): "+
			"every finished job's output would be deleted at once", c.MaxOutputBytes, c.MaxLogBytes)
	}
	if c.Port < 0 || c.Port > 65535 {
		return &EnvError{"TT_DEVICE_PORT", strconv.Itoa(c.Port), "want a TCP port, 0-65535"}
	}
	if c.StateDir != "" && !filepath.IsAbs(c.StateDir) {
		return &EnvError{"TT_DEVICE_LOG_DIR", c.StateDir, "want an absolute path"}
	}
	return nil
}

// ParseDevices reads a comma-separated list of card numbers, such as "0,1".
// Duplicates and anything but non-negative integers are refused; the result
// is sorted.
func ParseDevices(s string) ([]int, error) {
	var ids []int
	seen := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 || n > 1<<16 || strconv.Itoa(n) != part {
			return nil, fmt.Errorf("%q is not a card number (want non-negative integers separated by commas)", part)
		}
		if seen[n] {
			return nil, fmt.Errorf("card %d is listed twice", n)
		}
		seen[n] = true
		ids = append(ids, n)
	}
	sort.Ints(ids)
	return ids, nil
}

// Discover lists the numeric device nodes in devDir (normally
// DefaultDevDir). A missing directory or one without numeric entries yields
// ErrNoDevices, whose message names TT_DEVICE_IDS.
func Discover(devDir string) ([]int, error) {
	entries, err := os.ReadDir(devDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("listing %s: %w", devDir, err)
	}
	var ids []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil || n < 0 || strconv.Itoa(n) != e.Name() {
			continue
		}
		ids = append(ids, n)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("no numeric device nodes in %s: %w", devDir, ErrNoDevices)
	}
	sort.Ints(ids)
	return ids, nil
}

// StateDir resolves the state directory: TT_DEVICE_LOG_DIR, else
// $XDG_STATE_HOME/tt-device-queue/logs-v2, else
// ~/.local/state/tt-device-queue/logs-v2. The daemon and the CLI both call it
// so the CLI finds the daemon's token on its own.
func StateDir(lookup Lookup) (string, error) {
	if v, ok := lookup("TT_DEVICE_LOG_DIR"); ok && strings.TrimSpace(v) != "" {
		v = strings.TrimSpace(v)
		if !filepath.IsAbs(v) {
			return "", &EnvError{"TT_DEVICE_LOG_DIR", v, "want an absolute path"}
		}
		return filepath.Clean(v), nil
	}
	base, ok := lookup("XDG_STATE_HOME")
	if !ok || !filepath.IsAbs(base) {
		home, _ := lookup("HOME")
		if home == "" || !filepath.IsAbs(home) {
			return "", errors.New("cannot find the state directory: HOME is unset; set TT_DEVICE_LOG_DIR")
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "tt-device-queue", "logs-v2"), nil
}
