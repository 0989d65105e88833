// Command queued is the tt-device-queue daemon: one FIFO job queue per
// Tenstorrent card behind an HTTP API on 127.0.0.1:5741. It reads the
// seed's TT_DEVICE_* environment variables; flags override them.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"
	"golang.org/x/sys/unix"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/config"
	"github.com/ttkit/ttkit/queued/cpupin"
	"github.com/ttkit/ttkit/queued/jobcgroup"
	"github.com/ttkit/ttkit/queued/legacyimport"
	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/scheduler"
	"github.com/ttkit/ttkit/queued/server"
	"github.com/ttkit/ttkit/queued/slurmcheck"
	"github.com/ttkit/ttkit/queued/store"
	"github.com/ttkit/ttkit/queued/telemetry"
	"github.com/ttkit/ttkit/queued/version"
)

// cli is queued's command line: every setting's flag comes from
// config.Config's declaration (config.Flags reads them over what FromEnv
// found), so a flag overrides its variable.
type cli struct {
	Version       kong.VersionFlag `help:"Print the version and exit."`
	config.Config `embed:""`
}

func main() {
	// First: started as the exec helper of a running queued, this process
	// becomes a job's program here and never returns.
	runner.ServeExecJob()
	// Nothing queued inherited beyond 0-2 (a wrapper's `9</etc/shadow`, a
	// CI runner's descriptors) reaches a job, whatever starts it.
	unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	// The environment first, the flags over it. A bad variable is
	// reported after the flags are parsed, so --help and --version work
	// whatever the environment holds.
	cfg, envErr := config.FromEnv(os.LookupEnv)
	c := cli{Config: cfg}
	kong.Parse(&c, append(config.Flags(cfg),
		kong.Name("queued"),
		kong.Description("The tt-device-queue daemon: one FIFO job queue per Tenstorrent card, served over HTTP on loopback.\n\n"+envHelp()+metricsHelp),
		kong.UsageOnError(),
		kong.Vars{"version": "queued " + version.String()},
	)...)
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	tuneGC()
	if err := run(c.Config, envErr, log); err != nil {
		fmt.Fprintln(os.Stderr, "queued:", err)
		os.Exit(1)
	}
}

// envHelp lists the environment variables for --help.
func envHelp() string {
	var b strings.Builder
	b.WriteString("Environment variables (a flag, when given, overrides its variable):\n\n")
	for _, s := range config.Settings {
		if s.Env == "" {
			continue
		}
		name := s.Env
		if s.Flag != "" {
			name += " (" + s.Flag + ")"
		}
		fmt.Fprintf(&b, "  %s\n      %s Default: %s.\n", name, s.Help, s.Default)
	}
	return b.String()
}

// metricsHelp says how to export the daemon's own metrics.
const metricsHelp = `
Metrics (OpenTelemetry, over OTLP/HTTP; off unless an endpoint is set):

  OTEL_EXPORTER_OTLP_ENDPOINT
      Base URL of an OTLP/HTTP receiver, such as otelcol-tt's: http://127.0.0.1:4318.
  OTEL_EXPORTER_OTLP_METRICS_ENDPOINT
      Full URL for metrics alone, used as given (ending in /v1/metrics).
  OTEL_METRIC_EXPORT_INTERVAL
      Milliseconds between exports. Default: 60000.
  OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
      Override service.name (queued) and add resource attributes.
`

// configure checks the configuration the environment and the flags made,
// and finds the cards when none were named.
func configure(cfg config.Config, envErr error) (config.Config, error) {
	if envErr != nil {
		return cfg, envErr
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	if cfg.Devices == nil {
		ids, err := config.Discover(cfg.DevDir)
		if err != nil {
			return cfg, err
		}
		cfg.Devices = ids
	}
	return cfg, nil
}

// controls builds the reset commands. Without TT_DEVICE_HEALTH_CHECK_CMD
// the health check is the health_check.py installed with this executable;
// if it is missing, resets are refused (a health check that cannot run
// would mark every reset card dead) and the log says where it was
// expected.
func controls(cfg config.Config, log *slog.Logger) scheduler.Controls {
	health := cfg.HealthCheckCmd
	if health == "" {
		exe, err := os.Executable()
		if err == nil {
			exe, err = filepath.EvalSymlinks(exe)
		}
		script, found := config.HealthCheckScript(exe)
		if err == nil && found {
			health = config.DefaultHealthCheckCmd(script)
		} else {
			log.Warn("resets are disabled: health_check.py is not installed; install it or set TT_DEVICE_HEALTH_CHECK_CMD",
				"expected", script)
		}
	}
	// Validated when read (config's "rungs" check): no error here.
	site, _ := config.ParseRecoveryCmds(cfg.RecoveryCmds)
	var rungs []scheduler.Rung
	for _, r := range site {
		rungs = append(rungs, scheduler.Rung{Cmd: r.Cmd, Timeout: r.Timeout})
	}
	return scheduler.Controls{
		Reset: cfg.ResetCmd, HealthCheck: health, DeepReset: cfg.DeepResetCmd, Site: rungs,
		ResetTimeout: cfg.ResetTimeout, HealthCheckTimeout: cfg.HealthCheckTimeout, DeepResetTimeout: cfg.DeepResetTimeout,
	}
}

// listenAddr picks the listen address and refuses a non-loopback one
// unless allowed; it returns the hosts the API must accept besides the
// loopback names.
func listenAddr(cfg config.Config) (string, []string, error) {
	addr := cfg.Listen
	if addr == "" {
		addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Port))
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil, fmt.Errorf("--listen %q: %w", addr, err)
	}
	if host == "localhost" {
		return addr, nil, nil
	}
	ip := net.ParseIP(host)
	if ip != nil && ip.IsLoopback() {
		return addr, nil, nil
	}
	if !cfg.AllowNonLoopback {
		return "", nil, fmt.Errorf("--listen %q is not a loopback address; add --allow-non-loopback to serve it anyway", addr)
	}
	return addr, []string{host}, nil
}

// gcPercent is the GC target used when GOGC is not set. queued's live heap
// is about 2 MiB (the job table; bbolt's pages are outside the Go heap),
// so with the default of 100 the heap goal is Go's 4 MiB floor and a
// burst of submissions, each allocating some kilobytes of request, record
// and answer, starts a collection every 2 MiB: 5 from start to the end
// of a 900-job burst from 64 clients (gctrace), with stop-the-world
// phases of 1-2 ms each on a loaded 2-core machine. 200 makes it 2, for
// ~3 MiB more peak RSS (27 MiB after that burst; the target is 40 MiB).
const gcPercent = 200

// tuneGC applies gcPercent unless the operator chose GOGC themselves,
// and memoryLimit (rest.go) unless they chose GOMEMLIMIT.
func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(memoryLimit)
	}
}

// stopMargin is the time a stop needs after the kill grace: the jobs'
// last records, the store's close and the HTTP server's last answers.
const stopMargin = 5 * time.Second

// httpDrain bounds how long the HTTP server may still answer once the
// scheduler has stopped; a request that is still being sent then (a
// half-sent body) is cut off.
const httpDrain = time.Second

// answerQuiet is the pause in requests after which a stopping daemon stops
// answering; see Server.IdleFor.
const answerQuiet = 150 * time.Millisecond

// killGrace maps a configured grace of the kill ladder to the
// scheduler's option: 0 means the next signal at once, which the
// scheduler spells as a negative grace (its zero value means the
// default).
func killGrace(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// run starts queued and serves until SIGTERM or SIGINT. Everything that can
// fail (settings, telemetry, store, token, listeners, address file) is done
// before the scheduler recovers the queues and starts its workers, so a
// start that fails changes no job.
func run(cfg config.Config, envErr error, log *slog.Logger) error {
	// From the first moment: a SIGTERM during the start (say, right after
	// the address file appears) must stop queued gracefully, not kill it.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	cfg, err := configure(cfg, envErr)
	if err != nil {
		return err
	}
	// Before anything else starts a thread or a process: threads take
	// their CPUs from the thread that starts them.
	cpu, err := cpupin.Keep(cfg.DaemonCPU)
	switch {
	case err != nil && cfg.DaemonCPU == cpupin.Auto:
		// The default asks for a saving, not a placement: run unkept.
		log.Warn("queued's threads are not kept to one CPU", "err", err)
	case err != nil:
		return fmt.Errorf("TT_DEVICE_DAEMON_CPU=%s: %w", cfg.DaemonCPU, err)
	}
	if cpu >= 0 {
		log.Info("queued's threads keep to one CPU; its jobs run on every CPU it started with", "cpu", cpu)
	}
	addr, extraHosts, err := listenAddr(cfg)
	if err != nil {
		return err
	}
	var sys system
	if cfg.Mode.System() {
		if sys, err = resolveSystem(cfg); err != nil {
			return err
		}
		if err := ownedDir(cfg.StateDir, "state directory", true); err != nil {
			return err
		}
		if cfg.Listen == "" && !cfg.PortSet {
			addr = "" // system mode: TCP only when asked for
		}
	}
	if ladder := cfg.KillGrace + cfg.TermGrace; ladder+stopMargin > cfg.StopTimeout {
		log.Warn("the kill ladder does not fit in the service manager's stop timeout: a stop may be cut off before it records how the running jobs ended; raise TimeoutStopSec and TT_DEVICE_STOP_TIMEOUT or lower TT_DEVICE_KILL_GRACE and TT_DEVICE_TERM_GRACE",
			"kill_grace", cfg.KillGrace, "term_grace", cfg.TermGrace, "stop_timeout", cfg.StopTimeout, "needed", ladder+stopMargin)
	}
	if cfg.JobTasksMax > 0 && !jobcgroup.Default().Has("pids") {
		log.Warn("TT_DEVICE_JOB_TASKS_MAX is not enforced: jobs get no cgroup of their own with the pids controller here (Delegate=yes, cgroup v2 with pids)",
			"job_tasks_max", cfg.JobTasksMax)
	}
	metrics, err := telemetry.Setup(context.Background(), version.String(), log)
	if err != nil {
		return err
	}
	defer func() {
		// After the scheduler's Stop (deferred later, so run earlier): the
		// jobs it interrupted are in the last export.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := metrics.Shutdown(ctx); err != nil {
			log.Warn("last metrics export", "err", err)
		}
	}()
	if metrics.Enabled() {
		log.Info("exporting metrics over OTLP/HTTP", "endpoint", metrics.Endpoint)
	} else {
		log.Info("metrics are not exported; set OTEL_EXPORTER_OTLP_ENDPOINT (otelcol-tt: http://127.0.0.1:4318) to send them")
	}
	if _, _, err := legacyimport.ImportOnStart(cfg.StateDir, legacyimport.Options{DefaultTimeout: cfg.DefaultTimeout, MaxLogBytes: cfg.MaxLogBytes,
		Mode: cfg.Mode, Port: cfg.Port, Logger: log}); err != nil {
		return err
	}
	st, err := store.Open(cfg.StateDir, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	starts, err := store.OpenStartLog(cfg.StateDir)
	if err != nil {
		return err
	}
	defer starts.Close()
	token, err := api.EnsureToken(cfg.StateDir)
	if err != nil {
		return err
	}
	var ln net.Listener
	url, listenTCP := "", ""
	if addr != "" {
		if ln, err = net.Listen("tcp", addr); err != nil {
			return fmt.Errorf("listening on %s: %w", addr, err)
		}
		defer ln.Close()
		listenTCP = ln.Addr().String()
		url = "http://" + listenTCP
	}
	var uln *net.UnixListener
	sock := cfg.Socket
	if cfg.Mode.System() {
		// System mode: the socket every user of the host connects to, with
		// the mode and group that decide who may.
		uln, err = listenSystem(cfg, sys)
	} else {
		// The CLI's way in: a socket in the 0700 state directory, where no
		// other user can listen in queued's place while it is down.
		sock = filepath.Join(cfg.StateDir, api.SocketFile)
		uln, err = server.ListenUnix(sock, 0o600, -1)
	}
	if err != nil {
		return err
	}
	defer os.Remove(sock)
	defer uln.Close()
	if url != "" {
		if err := api.WriteAddress(cfg.StateDir, url); err != nil {
			return err
		}
		defer os.Remove(filepath.Join(cfg.StateDir, api.AddressFile))
	}

	squeue, err := slurmcheck.Find(cfg.SlurmCheck)
	if err != nil {
		return err
	}
	var slurmGone func(context.Context, string) (bool, string, error)
	if squeue != "" {
		slurmGone = slurmcheck.Gone(squeue)
		log.Info("holds taken for Slurm jobs end when squeue says their job is gone", "squeue", squeue, "every", cfg.SlurmCheckInterval)
	}
	shares := cfg.Shares()
	shell := runner.Shell()
	if cfg.LoginShell {
		if shell, err = runner.LoginShell(); err != nil {
			return err
		}
		log.Info("jobs run in a login shell (TT_DEVICE_LOGIN_SHELL)", "shell", shell)
	}
	sched, err := scheduler.New(scheduler.Options{
		Store: st, Starts: starts, Devices: cfg.Devices, OutputDir: filepath.Join(cfg.StateDir, "output"),
		DefaultTimeout: cfg.DefaultTimeout, MaxQueued: cfg.MaxQueued, MaxLogBytes: cfg.MaxLogBytes,
		KillGrace: killGrace(cfg.KillGrace), TermGrace: killGrace(cfg.TermGrace), DefaultIdleTimeout: cfg.IdleTimeout, RetentionDays: cfg.RetentionDays, MaxCompleted: cfg.MaxCompleted, Logger: log,
		Shell: shell, Controls: controls(cfg, log), DriverPath: cfg.DriverPath, WaitForeign: cfg.WaitsForForeign(), Fence: sys.fence,
		MeterProvider: metrics, MaxOutputBytes: cfg.MaxOutputBytes,
		Mode: cfg.Mode, ResetAccount: sys.reset, JobTasksMax: cfg.JobTasksMax, JobOOMScoreAdj: cfg.ChildOOMScoreAdj,
		SysfsPath: cfg.SysfsPath, VisibleBDF: cfg.Visible == "bdf", CrossCard: cfg.CrossCard, DevDir: cfg.DevDir,
		GateInterval: cfg.GateInterval, GateCmd: cfg.GateCmd, GateTimeout: cfg.GateTimeout, RecoveryCooldown: offWhenZero(cfg.RecoveryCooldown), RecoveryMaxPerHour: cfg.RecoveryMaxPerHour,
		SlurmJobGone: slurmGone, SlurmCheckInterval: cfg.SlurmCheckInterval,
		MaxQueuedPerUser: shares.Queued, MaxCompletedPerUser: shares.Completed, MaxOutputBytesPerUser: shares.OutputBytes, Exempt: server.Admins(cfg.Mode, sys.adminGID),
	})
	if err != nil {
		return err
	}
	defer sched.Stop()
	scfg := server.Config{Scheduler: sched, Token: token, ListenAddr: listenTCP, Version: version.String(), MaxTimeout: cfg.MaxTimeout,
		MaxRequestBytes: cfg.MaxRequestBytes, Workers: cfg.HTTPWorkers, ExtraHosts: extraHosts, Logger: log,
		MaxConns: cfg.HTTPMaxConns, WriteTimeout: cfg.HTTPWriteTimeout, Mode: cfg.Mode,
		ConnsPerUser: shares.Conns, WorkersPerUser: shares.Workers, WaitsPerUser: shares.Waits}
	if cfg.Mode.System() {
		scfg.AllowPeer, scfg.AdminGID, scfg.AdminGroup = everyone, sys.adminGID, cfg.AdminGroup
	}
	srv, err := server.NewServer(scfg)
	if err != nil {
		return err
	}
	hs := srv.NewHTTPServer()
	rested := make(chan struct{})
	defer close(rested)
	go atRest(srv, st, heapAllocated, rested, log.Warn)
	served := make(chan error, 2)
	if ln != nil {
		go func() { served <- hs.Serve(ln) }()
	}
	go func() { served <- hs.Serve(uln) }()
	log.Info("queued listening", "version", version.String(), "mode", cfg.Mode, "url", url, "socket", sock, "cards", cfg.Devices, "state_dir", cfg.StateDir, "pid", os.Getpid(),
		"wait_foreign", cfg.WaitsForForeign())
	if cfg.Mode.System() {
		log.Info("system mode: each job runs as the user who submitted it", "socket_mode", fmt.Sprintf("%04o", sys.socketMode),
			"socket_group", cfg.SocketGroup, "admin_group", cfg.AdminGroup, "reset_user", cfg.ResetUser, "tcp", url != "", "enforce", cfg.Enforce)
	}

	select {
	case sig := <-sigs:
		log.Info("stopping: dispatch stopped, running jobs get SIGINT now (SIGTERM after the kill grace, SIGKILL after the term grace) and end as interrupted, queued jobs stay queued; new submissions are refused",
			"signal", sig.String(), "kill_grace", cfg.KillGrace, "term_grace", cfg.TermGrace)
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	}
	// The scheduler stops first, at once, whatever the HTTP server is
	// waiting for; meanwhile the server goes on answering (submissions get
	// 503), so the answers in flight, and those about the stopping jobs,
	// are given.
	began := time.Now()
	sched.Stop()
	// A client that waited for a job now ended asks for its record next:
	// answer until the requests pause (answerQuiet), within httpDrain.
	drainBy := time.Now().Add(httpDrain)
	for srv.IdleFor() < answerQuiet && time.Now().Before(drainBy) {
		time.Sleep(10 * time.Millisecond) // polling the server's request counter
	}
	srv.Close()
	ctx, cancel := context.WithDeadline(context.Background(), drainBy)
	defer cancel()
	if err := hs.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		hs.Close()
		log.Info("HTTP shutdown: cut off the requests still open", "err", err)
	}
	log.Info("stopped", "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// offWhenZero maps a setting whose 0 means never (TT_DEVICE_RECOVERY_COOLDOWN)
// to the scheduler's spelling of it, a negative value: its zero value
// means the default.
func offWhenZero(d time.Duration) time.Duration { return killGrace(d) }
