// Package defaults holds the default of each queued setting that packages
// other than config fall back on when they are given none: the scheduler
// (a zero Options field), the server, the legacy import. config's
// declaration of each setting names its default here (default:"${Name}"),
// so every default is written once in Go, and a package that needs one
// imports this leaf instead of config, which reads the environment and
// sits above them.
package defaults

import (
	"net"
	"strconv"

	"github.com/ttkit/ttkit/internal/procscan"
)

// URL is where a client finds the daemon unless told otherwise: the
// loopback address on TT_DEVICE_PORT's default. It lives here, not in
// the wire package, so that queued/api depends on nothing of queued's.
var URL = "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(Port))

// The defaults, by the variable that sets each.
const (
	DefaultTimeoutSeconds = 3600     // TT_DEVICE_DEFAULT_TIMEOUT
	MaxQueuedJobs         = 1000     // TT_DEVICE_MAX_QUEUED_JOBS
	MaxLogBytes           = 16 << 20 // TT_DEVICE_MAX_LOG_BYTES
	MaxOutputBytes        = 4 << 30  // TT_DEVICE_MAX_OUTPUT_BYTES
	RetentionDays         = 30       // TT_DEVICE_RETENTION_DAYS
	MaxCompletedJobs      = 10000    // TT_DEVICE_MAX_COMPLETED_JOBS
	// TT_DEVICE_KILL_GRACE, SIGINT to SIGTERM: tt-metal closes the
	// device on SIGINT, and tt-device-mcp's spec records that a 10 s
	// escalation to SIGKILL wedged Ethernet cores; it waits 60 s, as
	// queued does (docs/job-endings.md).
	KillGraceSeconds = 60
	// TT_DEVICE_TERM_GRACE, SIGTERM to SIGKILL: tt-device-mcp's 15 s.
	TermGraceSeconds = 15
	// TT_DEVICE_IDLE_TIMEOUT: off; a job's silence is normal for some
	// workloads (a long compile), so a site chooses its own.
	IdleTimeoutSeconds        = 0
	ResetTimeoutSeconds       = 300                        // TT_DEVICE_RESET_TIMEOUT
	HealthCheckTimeoutSeconds = 120                        // TT_DEVICE_HEALTH_CHECK_TIMEOUT
	DeepResetTimeoutSeconds   = 300                        // TT_DEVICE_DEEP_RESET_TIMEOUT
	DriverPath                = procscan.DefaultDriverPath // TT_DEVICE_DRIVER_PATH, as the collector reads it
	ResultBytes               = 1 << 20                    // TT_DEVICE_RESULT_BYTES
	HTTPWorkers               = 16                         // TT_DEVICE_HTTP_WORKERS
	// TT_DEVICE_HTTP_MAX_CONNS: far above what the CLI and a few scripts
	// keep open, far below the daemon's file descriptor limit, which its
	// job output files need too.
	HTTPMaxConns = 256
	// TT_DEVICE_HTTP_WRITE_TIMEOUT: answers are at most about a MiB, so
	// only a client that stops reading hits it.
	HTTPWriteTimeoutSeconds = 30
	// TT_DEVICE_RESET_CMD: tt-smi from the venv tt-installer sets up.
	ResetCmd = "~/tenstorrent/.venv/bin/tt-smi -r /dev/tenstorrent/{device} --no_reinit"

	Port                      = 5741               // TT_DEVICE_PORT, the seed's
	StopTimeoutSeconds        = 90                 // TT_DEVICE_STOP_TIMEOUT, the unit's TimeoutStopSec: the ladder's 75 s and the final writes
	WaitForeign               = false              // TT_DEVICE_WAIT_FOREIGN
	LoginShell                = false              // TT_DEVICE_LOGIN_SHELL
	DevDir                    = "/dev/tenstorrent" // --dev-dir: the cards' device nodes
	SysfsPath                 = "/sys"             // TT_DEVICE_SYSFS_PATH
	Visible                   = "off"              // TT_DEVICE_VISIBLE
	CrossCard                 = "warn"             // TT_DEVICE_CROSS_CARD
	Enforce                   = "off"              // TT_DEVICE_ENFORCE: cooperative, as the seed has it
	ChildOOMScoreAdj          = 500                // TT_DEVICE_CHILD_OOM_SCORE_ADJ
	DaemonCPU                 = "auto"             // TT_DEVICE_DAEMON_CPU: queued's own threads on one CPU (package cpupin)
	SlurmCheckIntervalSeconds = 60                 // TT_DEVICE_SLURM_CHECK_INTERVAL
	// TT_DEVICE_GATE_INTERVAL: a read of a card's node, entry and
	// heartbeat costs microseconds, so every 5 s costs nothing, and a
	// stalled heartbeat is seen within two reads (5 to 10 s), well
	// before a person would notice; any firmware heartbeat moves many
	// times in 5 s (tt-device-mcp reads it 0.5 s apart).
	GateIntervalSeconds = 5
	// TT_DEVICE_GATE_TIMEOUT: tt-smi -s answers in seconds; a minute
	// leaves an Ethernet check room and bounds a probe that hangs.
	GateTimeoutSeconds = 60
	// TT_DEVICE_RECOVERY_COOLDOWN: a reset and its health check take up
	// to TT_DEVICE_RESET_TIMEOUT + TT_DEVICE_HEALTH_CHECK_TIMEOUT; five
	// minutes between automatic ones keeps a card that never comes back
	// from being reset back to back, yet retries it a dozen times an hour.
	RecoveryCooldownSeconds = 300
	// RecoveryMaxPerHour (TT_DEVICE_RECOVERY_MAX_PER_HOUR) bounds the
	// automatic recovery ladders of one card in any hour. An exhausted
	// ladder makes the card dead, so more ladders come only when one
	// succeeded and the card turned unfit again: a card that flaps three
	// times an hour is broken in a way a reset does not mend, and every
	// ladder holds its queue and may cost minutes (a deep reset, a power
	// cycle); three still rides out the odd wedge of a busy hour.
	RecoveryMaxPerHour = 3
)

// PerUserShare is the share of a total limit each user may take on a
// shared (system-mode) daemon unless told otherwise: a quarter, so one
// user (or a runaway script) leaves three quarters of the queue, the
// output budget, the connections and the handlers to everyone else. The
// per-user settings (TT_DEVICE_MAX_QUEUED_PER_USER and the others)
// default to Share of their total.
const PerUserShare = 4

// Share is a user's default share of total: total/PerUserShare, at least
// 1.
func Share[T int | int64](total T) T { return max(total/PerUserShare, 1) }

// Waits is a user's default number of long-polls waiting at once
// (TT_DEVICE_HTTP_WAITS_PER_USER): half of their connections, so a user
// whose long-polls wait still has connections for everything else.
func Waits(connsPerUser int) int { return max(connsPerUser/2, 1) }

// Vars maps each default's ${Name}, as config's default tags write it, to
// its value.
var Vars = map[string]any{
	"DefaultTimeoutSeconds":     DefaultTimeoutSeconds,
	"MaxQueuedJobs":             MaxQueuedJobs,
	"MaxLogBytes":               MaxLogBytes,
	"MaxOutputBytes":            int64(MaxOutputBytes),
	"RetentionDays":             RetentionDays,
	"MaxCompletedJobs":          MaxCompletedJobs,
	"KillGraceSeconds":          KillGraceSeconds,
	"TermGraceSeconds":          TermGraceSeconds,
	"IdleTimeoutSeconds":        IdleTimeoutSeconds,
	"ResetTimeoutSeconds":       ResetTimeoutSeconds,
	"HealthCheckTimeoutSeconds": HealthCheckTimeoutSeconds,
	"DeepResetTimeoutSeconds":   DeepResetTimeoutSeconds,
	"DriverPath":                DriverPath,
	"ResultBytes":               ResultBytes,
	"HTTPWorkers":               HTTPWorkers,
	"HTTPMaxConns":              HTTPMaxConns,
	"HTTPWriteTimeoutSeconds":   HTTPWriteTimeoutSeconds,
	"Port":                      Port,
	"StopTimeoutSeconds":        StopTimeoutSeconds,
	"ResetCmd":                  ResetCmd,
	"WaitForeign":               WaitForeign,
	"LoginShell":                LoginShell,
	"DevDir":                    DevDir,
	"SysfsPath":                 SysfsPath,
	"Visible":                   Visible,
	"CrossCard":                 CrossCard,
	"Enforce":                   Enforce,
	"ChildOOMScoreAdj":          ChildOOMScoreAdj,
	"DaemonCPU":                 DaemonCPU,
	"SlurmCheckIntervalSeconds": SlurmCheckIntervalSeconds,
	"GateIntervalSeconds":       GateIntervalSeconds,
	"GateTimeoutSeconds":        GateTimeoutSeconds,
	"RecoveryCooldownSeconds":   RecoveryCooldownSeconds,
	"RecoveryMaxPerHour":        RecoveryMaxPerHour,
}
