// Package config holds queued's settings, each declared once (see Config):
// its default, bounds, help, the environment variable that sets it (the
// seed's table plus a few of our own) and the daemon's flag. It also
// discovers the cards and the state directory that the daemon and the CLI
// share, so both find the same token, address and store without being
// told.
package config

//go:generate go run ./gendoc ../../docs/operations.md

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/defaults"
)

// Config is queued's complete configuration: every setting, after the
// defaults, the environment and (in the daemon) the flags are applied.
//
// Each setting is one field, declared once, in its struct tag: its
// environment variable (env), its daemon flag (name; a field tagged
// kong:"-" has none), its default, its bounds (min, max), what its value
// must be (check: abspath, account, socket), the default as people read
// it when the tag cannot say it (doc), and its help. FromEnv, Default,
// Validate, queued's flags and --help, tt-device-queue doctor and the
// settings table of docs/operations.md all read these tags (see
// Settings), so a setting added here shows up in every one of them.
// Durations are whole seconds (type:"seconds"); sizes are bytes.
type Config struct {
	// Mode is user or system mode, decided once by FromEnv: system when
	// TT_DEVICE_SOCKET is set. Everything that differs between the modes
	// asks it.
	Mode api.Mode `kong:"-"`
	// PortSet says TT_DEVICE_PORT was given: system mode listens on TCP
	// only then (or with --listen).
	PortSet bool `kong:"-"`
	// WaitForeignSet says TT_DEVICE_WAIT_FOREIGN was given: under
	// enforcement a card waits for a foreign holder unless it says 0.
	WaitForeignSet bool `kong:"-"`

	// The seed's settings, in its table's order.

	Devices          []int         `name:"device-ids" env:"TT_DEVICE_IDS" type:"cards" placeholder:"0,1" doc:"numeric nodes under /dev/tenstorrent (--dev-dir)" help:"Comma-separated card numbers that get a queue."`
	DefaultTimeout   time.Duration `name:"default-timeout" env:"TT_DEVICE_DEFAULT_TIMEOUT" type:"seconds" default:"${DefaultTimeoutSeconds}" min:"1" placeholder:"SEC" help:"Seconds a job may run, every repeat together, when it asks for no timeout."`
	MaxTimeout       time.Duration `name:"max-timeout" env:"TT_DEVICE_MAX_TIMEOUT" type:"seconds" default:"${DefaultMaxTimeoutSeconds}" min:"1" placeholder:"SEC" help:"Largest timeout in seconds a job may ask for."`
	MaxQueued        int           `name:"max-queued-jobs" env:"TT_DEVICE_MAX_QUEUED_JOBS" default:"${MaxQueuedJobs}" min:"1" placeholder:"N" help:"Queued jobs allowed over all cards; more are refused with 429."`
	MaxLogBytes      int64         `name:"max-log-bytes" env:"TT_DEVICE_MAX_LOG_BYTES" default:"${MaxLogBytes}" min:"1" placeholder:"BYTES" help:"Bytes of output kept per job: past it the first and the last half are kept (the tail in memory while the job runs) and the middle is cut and counted."`
	ResultBytes      int64         `kong:"-" env:"TT_DEVICE_RESULT_BYTES" default:"${ResultBytes}" min:"1" help:"Bytes of output the CLI's result command prints (tt-device-queue result --max-bytes)."`
	MaxRequestBytes  int64         `name:"max-request-bytes" env:"TT_DEVICE_MAX_REQUEST_BYTES" default:"${DefaultMaxRequestBytes}" min:"1" placeholder:"BYTES" help:"Largest HTTP request body; larger ones get 413."`
	HTTPWorkers      int           `name:"http-workers" env:"TT_DEVICE_HTTP_WORKERS" default:"${HTTPWorkers}" min:"1" placeholder:"N" help:"HTTP handlers working at once; long-poll waits and writing answers do not count."`
	HTTPMaxConns     int           `kong:"-" env:"TT_DEVICE_HTTP_MAX_CONNS" default:"${HTTPMaxConns}" min:"1" help:"Open HTTP connections at most, so idle or slow clients cannot use up queued's file descriptors; at the bound a new one closes the one idle or slow to send its request the longest, or gets 503 when all are busy."`
	HTTPWriteTimeout time.Duration `kong:"-" env:"TT_DEVICE_HTTP_WRITE_TIMEOUT" type:"seconds" default:"${HTTPWriteTimeoutSeconds}" min:"1" help:"Seconds an HTTP answer may take to be written from its first byte; a client that stops reading is disconnected."`
	MaxOutputBytes   int64         `kong:"-" env:"TT_DEVICE_MAX_OUTPUT_BYTES" default:"${MaxOutputBytes}" min:"1" help:"Bytes of output kept over all jobs, at least TT_DEVICE_MAX_LOG_BYTES; beyond it the oldest finished jobs' output is deleted (their records stay)."`
	RetentionDays    int           `name:"retention-days" env:"TT_DEVICE_RETENTION_DAYS" default:"${RetentionDays}" min:"1" placeholder:"DAYS" help:"Days finished jobs and their output are kept."`
	MaxCompleted     int           `name:"max-completed-jobs" env:"TT_DEVICE_MAX_COMPLETED_JOBS" default:"${MaxCompletedJobs}" min:"1" placeholder:"N" help:"Finished jobs kept at most; older ones are deleted first."`

	// Where queued keeps its state and listens.

	StateDir         string `name:"state-dir" env:"TT_DEVICE_LOG_DIR" type:"path" check:"abspath" placeholder:"DIR" doc:"${XDG_STATE_HOME:-~/.local/state}/tt-device-queue/logs-v2; /var/lib/tt-device-queue in system mode" help:"State directory: store, token, address, socket and one output file per job."`
	Port             int    `kong:"-" env:"TT_DEVICE_PORT" default:"${Port}" min:"0" max:"65535" help:"Loopback port the daemon listens on (unless --listen names another address) and the CLI connects to; in system mode TCP is off unless this or --listen is given."`
	Listen           string `name:"listen" placeholder:"HOST:PORT" doc:"127.0.0.1 and TT_DEVICE_PORT" help:"Address to listen on (default 127.0.0.1 and TT_DEVICE_PORT)."`
	AllowNonLoopback bool   `name:"allow-non-loopback" doc:"off" help:"Allow --listen on an address other than loopback; every request still needs the token."`

	// Stopping jobs.

	KillGrace   time.Duration `name:"kill-grace" env:"TT_DEVICE_KILL_GRACE" type:"seconds" default:"${KillGraceSeconds}" min:"0" placeholder:"SEC" help:"Seconds from SIGINT to SIGTERM when a job is stopped (killed, timed out, hung, interrupted by a reset or a service stop): the time tt-metal gets to close the device; 0 sends SIGTERM at once."`
	TermGrace   time.Duration `name:"term-grace" env:"TT_DEVICE_TERM_GRACE" type:"seconds" default:"${TermGraceSeconds}" min:"0" placeholder:"SEC" help:"Seconds from SIGTERM to SIGKILL when a job is stopped; 0 sends SIGKILL right after SIGTERM. A job that needed SIGKILL sends its card through the gate with the site probe."`
	IdleTimeout time.Duration `name:"idle-timeout" env:"TT_DEVICE_IDLE_TIMEOUT" type:"seconds" default:"${IdleTimeoutSeconds}" min:"0" placeholder:"SEC" doc:"0 (off)" help:"Seconds a job may write no output before it is ended as hung (exit code -124), for jobs submitted without --idle-timeout; 0 is off."`
	StopTimeout time.Duration `kong:"-" env:"TT_DEVICE_STOP_TIMEOUT" type:"seconds" default:"${StopTimeoutSeconds}" min:"1" help:"Seconds the service manager waits after SIGTERM before it kills queued (the unit's TimeoutStopSec); queued warns at start when the kill ladder's graces leave too little of it to record how the jobs ended."`

	// Resets: the control commands a reset runs, as shell programs with
	// {device} substituted (a reset command without it gets the card
	// number appended). An empty HealthCheckCmd means
	// DefaultHealthCheckCmd with the installed health_check.py (see
	// HealthCheckScript); an empty DeepResetCmd means no deep reset.

	ResetCmd           string        `name:"reset-cmd" env:"TT_DEVICE_RESET_CMD" default:"${ResetCmd}" placeholder:"CMD" help:"Shell command that resets one card; {device} is the card number, appended when absent."`
	HealthCheckCmd     string        `name:"health-check-cmd" env:"TT_DEVICE_HEALTH_CHECK_CMD" placeholder:"CMD" doc:"~/tenstorrent/.venv/bin/python3 <prefix>/share/tt-device-queue/health_check.py {device}" help:"Shell command that must exit 0 when one card works after a reset; {device} is the card number."`
	DeepResetCmd       string        `name:"deep-reset-cmd" env:"TT_DEVICE_DEEP_RESET_CMD" placeholder:"CMD" help:"Shell command, the second rung of the recovery ladder: climbed when the reset did not bring the card back (it failed, or the health check or the gate after it did); {device} as for the reset."`
	ResetTimeout       time.Duration `name:"reset-timeout" env:"TT_DEVICE_RESET_TIMEOUT" type:"seconds" default:"${ResetTimeoutSeconds}" min:"1" placeholder:"SEC" help:"Seconds the reset command may run."`
	HealthCheckTimeout time.Duration `name:"health-check-timeout" env:"TT_DEVICE_HEALTH_CHECK_TIMEOUT" type:"seconds" default:"${HealthCheckTimeoutSeconds}" min:"1" placeholder:"SEC" help:"Seconds each run of the health check may take."`
	DeepResetTimeout   time.Duration `name:"deep-reset-timeout" env:"TT_DEVICE_DEEP_RESET_TIMEOUT" type:"seconds" default:"${DeepResetTimeoutSeconds}" min:"1" placeholder:"SEC" help:"Seconds the deep reset command may run."`

	// Fitness: the gate every job passes before it starts (see
	// docs/fitness.md).

	GateInterval       time.Duration `kong:"-" env:"TT_DEVICE_GATE_INTERVAL" type:"seconds" default:"${GateIntervalSeconds}" min:"1" help:"Seconds between two reads of each card's device node, sysfs entry and firmware heartbeat (tt_heartbeat); a heartbeat that did not move between two reads makes the card unfit, and the gate before each job uses the last read (a fresh one only when it is older than two intervals)."`
	GateCmd            string        `kong:"-" env:"TT_DEVICE_GATE_CMD" placeholder:"CMD" doc:"none" help:"Shell command that must exit 0 for a card to be fit ({device} is the card number), such as tt-smi -s or an Ethernet check; run at start and after a job that ended badly (timeout, kill, signal, interrupted), before the card's next job."`
	GateTimeout        time.Duration `kong:"-" env:"TT_DEVICE_GATE_TIMEOUT" type:"seconds" default:"${GateTimeoutSeconds}" min:"1" help:"Seconds TT_DEVICE_GATE_CMD may run; past it the card is unfit."`
	RecoveryCooldown   time.Duration `kong:"-" env:"TT_DEVICE_RECOVERY_COOLDOWN" type:"seconds" default:"${RecoveryCooldownSeconds}" min:"0" help:"Seconds between two automatic recovery ladders of a card that stays unfit (queued queues the reset itself when a card turns unfit, joining a pending one); 0 never resets a card by itself."`
	RecoveryCmds       string        `kong:"-" env:"TT_DEVICE_RECOVERY_CMDS" check:"rungs" placeholder:"CMDS" doc:"none" help:"The site's own rungs of the recovery ladder, climbed in order after the reset and the deep reset when neither brought the card back (such as a BMC power cycle): shell commands separated by ;; with {device} substituted, each with an optional timeout in seconds before a colon (600:ipmitool ... ;; /usr/local/bin/rescan {device}; default TT_DEVICE_DEEP_RESET_TIMEOUT); every rung is followed by the health check and the gate, at most 8."`
	RecoveryMaxPerHour int           `kong:"-" env:"TT_DEVICE_RECOVERY_MAX_PER_HOUR" default:"${RecoveryMaxPerHour}" min:"1" max:"60" help:"Automatic recovery ladders of one card in any hour at most; past it the unfit card holds its jobs until a user's reset (which is not bounded) or the hour has passed."`

	// The cards and their holders.

	DriverPath  string `name:"driver-path" env:"TT_DEVICE_DRIVER_PATH" check:"abspath" default:"${DriverPath}" placeholder:"DIR" help:"KMD directory whose <card>/pids files list the processes holding each card."`
	WaitForeign bool   `name:"wait-foreign" env:"TT_DEVICE_WAIT_FOREIGN" default:"${WaitForeign}" help:"1 (the flag alone): a card starts no job while a process outside the queue holds it."`
	DevDir      string `name:"dev-dir" env:"TT_DEVICE_DEV_DIR" check:"abspath" default:"${DevDir}" placeholder:"DIR" help:"The cards' device nodes: where numeric card nodes are looked for when no card numbers are given, and the nodes TT_DEVICE_ENFORCE fences."`
	SysfsPath   string `kong:"-" env:"TT_DEVICE_SYSFS_PATH" check:"abspath" default:"${SysfsPath}" help:"Where sysfs is mounted: each card's PCI address, type and serial are read from class/tenstorrent/tenstorrent!N there."`
	Visible     string `kong:"-" env:"TT_DEVICE_VISIBLE" check:"oneof=off|bdf" default:"${Visible}" help:"bdf: give each job TT_VISIBLE_DEVICES, the PCI addresses of its cards read at dispatch, so tt-umd opens only them; off leaves the variable alone, as the specification has it. A job's own --env TT_VISIBLE_DEVICES wins."`
	LoginShell  bool   `name:"login-shell" env:"TT_DEVICE_LOGIN_SHELL" default:"${LoginShell}" help:"1 (the flag alone): run each job in a login shell, bash -lc, so /etc/profile and ~/.profile set up its toolchain as the Python tool's jobs had; off (bash -c) keeps the PATH and virtualenv forwarded from the submitting shell, which Debian's /etc/profile resets. Needs bash."`
	CrossCard   string `kong:"-" env:"TT_DEVICE_CROSS_CARD" check:"oneof=warn|kill" default:"${CrossCard}" help:"What queued does when a process of a job holds a card outside the job's own (tt-metal opens every card it sees): warn shows it in status and the job's record and logs it; kill also ends the job."`

	// Containing jobs.

	ChildOOMScoreAdj *int   `kong:"-" env:"TT_DEVICE_CHILD_OOM_SCORE_ADJ" default:"${ChildOOMScoreAdj}" min:"-1000" max:"1000" help:"Each job's oom_score_adj (-1000 to 1000, or none to keep queued's), set before it runs so its user cannot lower it: the kernel's OOM killer takes a job before queued, as with the Python tool."`
	JobTasksMax      int    `kong:"-" env:"TT_DEVICE_JOB_TASKS_MAX" min:"1" help:"Processes and threads one job may have (pids.max of its cgroup; needs Delegate=yes, warned at start otherwise): on a shared host, one job's fork bomb then cannot take what queued and the other jobs need."`
	DaemonCPU        string `kong:"-" env:"TT_DEVICE_DAEMON_CPU" check:"cpu" default:"${DaemonCPU}" help:"The CPU queued's own threads keep to: auto, the one it starts on (when it may use two or more); a CPU's number; or any, every CPU it may use. Its jobs, resets and checks run on every CPU queued was started with (the Slurm check's squeue on queued's): only the daemon's hand-offs between its threads stay on one CPU, which saved a quarter of its CPU a job on our virtual machines."`

	// System mode: one root queued for every user of the host.

	Socket      string `kong:"-" env:"TT_DEVICE_SOCKET" check:"socket" doc:"none (user mode)" help:"System mode: as root, serve every user of the host on this Unix socket (the shipped unit: ${system_socket}, where the CLI looks), each job run as its submitter, each caller known by the kernel; TCP is off unless TT_DEVICE_PORT or --listen is given, and the state directory defaults to ${system_state_dir}."`
	SocketGroup string `kong:"-" env:"TT_DEVICE_SOCKET_GROUP" check:"account" mode:"system" doc:"none: every user may connect (0666)" help:"System mode: only this group's members may connect to the socket (mode 0660)."`
	AdminGroup  string `kong:"-" env:"TT_DEVICE_ADMIN_GROUP" check:"account" mode:"system" doc:"none: root only" help:"System mode: members of this group, like root, may see and kill every user's jobs, and their resets interrupt any job."`
	Enforce     string `kong:"-" env:"TT_DEVICE_ENFORCE" check:"oneof=off|acl" default:"${Enforce}" mode:"system" help:"System mode: acl fences the cards: their nodes must admit no one but root (make install-system ENFORCE=1 installs the udev rule; queued refuses to start otherwise, naming the node), and while a job or hold runs its user alone gets read-write on its cards (a POSIX ACL entry), taken back when it ends; a card then waits for a foreign holder unless TT_DEVICE_WAIT_FOREIGN=0. off is cooperative serialization."`
	ResetUser   string `kong:"-" env:"TT_DEVICE_RESET_USER" check:"account" mode:"system" doc:"root" help:"System mode: the user resets and health checks run as, in its home directory."`

	// Slurm: holds taken for Slurm jobs end when their job is gone.

	SlurmCheck         string        `kong:"-" env:"TT_DEVICE_SLURM_CHECK" doc:"squeue, when it is on PATH" help:"The squeue queued asks (squeue -h -j ID -o %T) whether a held card's Slurm job is gone; off never asks."`
	SlurmCheckInterval time.Duration `kong:"-" env:"TT_DEVICE_SLURM_CHECK_INTERVAL" type:"seconds" default:"${SlurmCheckIntervalSeconds}" min:"1" help:"Seconds between two such questions about each active hold's Slurm job."`

	// System mode: each user's share of what all of them share (see
	// Shares for the shares in effect when these are not given). Root,
	// queued's own user and the admin group's members are held only to
	// the totals.

	MaxQueuedPerUser      int   `kong:"-" env:"TT_DEVICE_MAX_QUEUED_PER_USER" min:"1" mode:"system" doc:"a quarter of TT_DEVICE_MAX_QUEUED_JOBS: 250" help:"System mode: queued jobs one user may have over all cards; more are refused with 429 naming the bound (root, queued's own user and the admin group are held only to TT_DEVICE_MAX_QUEUED_JOBS)."`
	MaxOutputBytesPerUser int64 `kong:"-" env:"TT_DEVICE_MAX_OUTPUT_BYTES_PER_USER" min:"1" mode:"system" doc:"a quarter of TT_DEVICE_MAX_OUTPUT_BYTES, at least TT_DEVICE_MAX_LOG_BYTES: 1 GiB" help:"System mode: bytes of output one user's finished jobs keep; beyond it that user's oldest output is deleted first, never another user's in its place (admins exempt)."`
	MaxCompletedPerUser   int   `kong:"-" env:"TT_DEVICE_MAX_COMPLETED_JOBS_PER_USER" min:"1" mode:"system" doc:"a quarter of TT_DEVICE_MAX_COMPLETED_JOBS: 2500" help:"System mode: finished jobs one user keeps; beyond it that user's oldest records (and their output) are deleted first, never another user's in their place (admins exempt)."`
	HTTPMaxConnsPerUser   int   `kong:"-" env:"TT_DEVICE_HTTP_MAX_CONNS_PER_USER" min:"1" mode:"system" doc:"a quarter of TT_DEVICE_HTTP_MAX_CONNS: 64" help:"System mode: open HTTP connections one user may have; a new one past it closes their own connection idle the longest, or answers their oldest long-poll now. An eighth of TT_DEVICE_HTTP_MAX_CONNS is kept for root, queued's own user and the admin group."`
	HTTPWorkersPerUser    int   `kong:"-" env:"TT_DEVICE_HTTP_WORKERS_PER_USER" min:"1" mode:"system" doc:"a quarter of TT_DEVICE_HTTP_WORKERS: 4" help:"System mode: HTTP handlers working for one user at once; a quarter of TT_DEVICE_HTTP_WORKERS is kept for root, queued's own user and the admin group."`
	HTTPWaitsPerUser      int   `kong:"-" env:"TT_DEVICE_HTTP_WAITS_PER_USER" min:"1" mode:"system" doc:"half of the connections per user: 32" help:"System mode: streams (long-polls of logs -f, run, wait and the status page) one user may have open at once; one more is refused with 503 naming this bound, never their short requests."`
}

// Shares are the per-user bounds a system-mode queued runs with: each
// per-user setting as given, or its default share of its total
// (defaults.Share: a quarter; the long-polls half of the connections).
type Shares struct {
	Queued, Completed, Conns, Workers, Waits int
	OutputBytes                              int64
}

// Shares returns the per-user bounds in effect. A user-mode queued has
// one user, who is the reserve: there they do not apply.
func (c Config) Shares() Shares {
	s := Shares{Queued: c.MaxQueuedPerUser, Completed: c.MaxCompletedPerUser, OutputBytes: c.MaxOutputBytesPerUser,
		Conns: c.HTTPMaxConnsPerUser, Workers: c.HTTPWorkersPerUser, Waits: c.HTTPWaitsPerUser}
	if s.Queued == 0 {
		s.Queued = defaults.Share(c.MaxQueued)
	}
	if s.Completed == 0 {
		s.Completed = defaults.Share(c.MaxCompleted)
	}
	if s.OutputBytes == 0 {
		s.OutputBytes = max(defaults.Share(c.MaxOutputBytes), c.MaxLogBytes)
	}
	if s.Conns == 0 {
		s.Conns = defaults.Share(c.HTTPMaxConns)
	}
	if s.Workers == 0 {
		s.Workers = defaults.Share(c.HTTPWorkers)
	}
	if s.Waits == 0 {
		s.Waits = defaults.Waits(s.Conns)
	}
	return s
}

// The defaults other packages and messages name, each read from its
// setting's declaration in Config.
var (
	// DefaultPort is the loopback TCP port the seed assigns to the service.
	DefaultPort = Default().Port
	// DefaultDevDir is where the kernel driver creates one node per card.
	DefaultDevDir = Default().DevDir
	// DefaultResetCmd resets one card by its device node. --no_reinit
	// keeps tt-smi from reinitializing (and so touching) every card
	// afterwards.
	DefaultResetCmd = Default().ResetCmd
	// DefaultDriverPath is where the KMD lists each card's holders.
	DefaultDriverPath = Default().DriverPath
)

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

// EnvError is a setting whose value cannot be used. Its message names
// the variable (or, for a value given on queued's command line, the flag)
// and quotes the value, so the operator can fix it at once.
type EnvError struct {
	// Var is the environment variable, or the flag ("--max-queued-jobs"),
	// that gave Value.
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

// Default returns the configuration with every setting at its declared
// default, in user mode and with no devices (they come from the
// environment or from Discover) and no state directory (FromEnv resolves
// it).
func Default() Config {
	c := Config{Mode: api.UserMode}
	v := reflect.ValueOf(&c).Elem()
	for _, s := range Settings {
		if s.def == "" {
			continue
		}
		x, err := s.parse(s.def)
		if err != nil {
			panic(fmt.Sprintf("config: the default of %s: %v", s.name(), err)) // a declaration's mistake; TestDefaults catches it
		}
		v.Field(s.field).Set(x)
	}
	return c
}

// FromEnv applies the environment to the defaults and decides the mode:
// system mode when TT_DEVICE_SOCKET is set. Unset or blank variables keep
// their defaults; the first unusable value is returned as an *EnvError,
// as is a system-mode setting given in user mode. The state directory is
// resolved (see StateDir) but not created.
func FromEnv(lookup Lookup) (Config, error) {
	c := Default()
	v := reflect.ValueOf(&c).Elem()
	given := map[string]bool{} // by field name
	read := func(systemOnly bool) error {
		for _, s := range Settings {
			if s.Env == "" || s.SystemOnly != systemOnly {
				continue
			}
			raw, ok := lookup(s.Env)
			raw = strings.TrimSpace(raw)
			if !ok || raw == "" {
				continue
			}
			if s.SystemOnly && !c.Mode.System() {
				return &EnvError{s.Env, raw, "only system mode uses it: set TT_DEVICE_SOCKET too"}
			}
			x, err := s.parse(raw)
			if err != nil {
				return &EnvError{s.Env, raw, err.Error()}
			}
			v.Field(s.field).Set(x)
			given[s.fieldName] = true
		}
		return nil
	}
	// The mode is decided here, once, before the settings only system
	// mode may be given.
	if err := read(false); err != nil {
		return c, err
	}
	if c.Socket != "" {
		c.Mode = api.SystemMode
	}
	if err := read(true); err != nil {
		return c, err
	}
	c.PortSet = given["Port"]
	c.WaitForeignSet = given["WaitForeign"]
	switch {
	case given["StateDir"]:
	case c.Mode.System():
		c.StateDir = DefaultSystemStateDir // root's, not a user's home
	default:
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

// Validate checks every setting against its declaration (for a value
// that came from a flag, as FromEnv checks the environment's), then the
// relations between settings that no single one can break on its own.
// An error names the setting and its value.
func (c Config) Validate() error {
	v := reflect.ValueOf(c)
	for _, s := range Settings {
		x := v.Field(s.field)
		if s.unset(x) {
			continue
		}
		if err := s.check(x); err != nil {
			return &EnvError{s.name(), s.format(x), err.Error()}
		}
	}
	if c.DefaultTimeout > c.MaxTimeout {
		return fmt.Errorf("default timeout %ds (%s) is above the maximum %ds (%s)",
			int64(c.DefaultTimeout/time.Second), names("DefaultTimeout"), int64(c.MaxTimeout/time.Second), names("MaxTimeout"))
	}
	if c.MaxOutputBytes < c.MaxLogBytes {
		return fmt.Errorf("kept output %d bytes (%s) is below one job's output %d bytes (%s): "+
			"every finished job's output would be deleted at once", c.MaxOutputBytes, names("MaxOutputBytes"), c.MaxLogBytes, names("MaxLogBytes"))
	}
	return c.validateShares()
}

// validateShares refuses a per-user bound that could never apply (above
// its total) or would delete every finished job's output of a user at
// once (below one job's output).
func (c Config) validateShares() error {
	sh := c.Shares()
	for _, b := range []struct {
		share, total int64
		field, of    string
	}{
		{int64(sh.Queued), int64(c.MaxQueued), "MaxQueuedPerUser", "MaxQueued"},
		{int64(sh.Completed), int64(c.MaxCompleted), "MaxCompletedPerUser", "MaxCompleted"},
		{sh.OutputBytes, c.MaxOutputBytes, "MaxOutputBytesPerUser", "MaxOutputBytes"},
		{int64(sh.Conns), int64(c.HTTPMaxConns), "HTTPMaxConnsPerUser", "HTTPMaxConns"},
		{int64(sh.Workers), int64(c.HTTPWorkers), "HTTPWorkersPerUser", "HTTPWorkers"},
		{int64(sh.Waits), int64(sh.Conns), "HTTPWaitsPerUser", "HTTPMaxConnsPerUser"},
	} {
		if b.share > b.total {
			return fmt.Errorf("%s %d is above %s %d: one user's share cannot be more than all there is", names(b.field), b.share, names(b.of), b.total)
		}
	}
	if c.MaxOutputBytesPerUser != 0 && c.MaxOutputBytesPerUser < c.MaxLogBytes {
		return fmt.Errorf("one user's kept output %d bytes (%s) is below one job's output %d bytes (%s): "+
			"every finished job's output of theirs would be deleted at once", c.MaxOutputBytesPerUser, names("MaxOutputBytesPerUser"), c.MaxLogBytes, names("MaxLogBytes"))
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

// ErrNoHome is StateDir's error when neither TT_DEVICE_LOG_DIR nor HOME
// names a directory. The CLI forgives it where it needs no state
// directory: given a socket's address, as a Slurm Prolog (run without
// HOME) is.
var ErrNoHome = errors.New("cannot find the state directory: HOME is unset; set TT_DEVICE_LOG_DIR")

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
			return "", ErrNoHome
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "tt-device-queue", "logs-v2"), nil
}
