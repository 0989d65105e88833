package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/ttkit/ttkit/queued/account"
	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/defaults"
	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
)

// Store is what the scheduler needs from durable storage; *store.Store
// implements it. It is an interface so tests can wrap the real store and
// inject write faults.
type Store interface {
	// Put durably writes job records in one transaction.
	Put(jobs ...store.Job) error
	// Job reads one whole record, its spec (command, environment)
	// included; store.ErrNotFound when there is none.
	Job(id string) (store.Job, error)
	// Spec reads what one job runs, its command and environment, and
	// nothing else of its record: a start's read (core.wholeRecord).
	Spec(id string) (store.Spec, error)
	// Brief reads one record without its spec (store.Job.Briefed).
	Brief(id string) (store.Job, error)
	// Owners reads the owner uid of each of ids that has one.
	Owners(ids []string) (map[string]uint32, error)
	// Match lists up to max ids starting with prefix.
	Match(prefix string, max int) ([]string, error)
	// Active lists queued and running records in FIFO order.
	Active() ([]store.Job, error)
	// LastSeq is the highest sequence number stored.
	LastSeq() (uint64, error)
	// Prune deletes finished records by age, count and each owner's count
	// and returns their ids.
	Prune(r store.Retention) ([]string, error)
	// Probe proves a write commits now.
	Probe() error
	// Commit durably writes card and job records in one transaction.
	Commit(cards []store.Card, jobs ...store.Job) error
	// Cards reads every card record.
	Cards() ([]store.Card, error)
	// Recent reads up to max finished records, newest first, to seed the
	// estimates at start.
	Recent(max int) ([]store.Job, error)
	// FinishedPage reads up to max finished records that keep accepts,
	// brief, newest first, looking at no more than scan of them, from
	// after (the newest when nil); it returns where the next page starts
	// (nil at the end) and how many records it looked at.
	FinishedPage(after []byte, max, scan int, keep func(*store.Job) bool) ([]store.Job, []byte, int, error)
	// Spill durably keeps, in reserved space, the card and job records the
	// store cannot take now, replacing what it kept; with no records it
	// clears it. The next store Open writes them in.
	Spill(cards []store.Card, jobs ...store.Job) error
}

// StartLog is where a card's worker makes a job's start durable with one
// fdatasync rather than a commit (markstart.go); *store.StartLog
// implements it, and tests wrap it to inject faults.
type StartLog interface {
	// MarkStart durably records in card's slot that job id starts its
	// attempt now (an empty id clears the slot); store.ErrNoStartSlot
	// when the start must be committed instead.
	MarkStart(card int, id string, attempt int) error
	// Marks reads what the slots say.
	Marks() ([]store.StartMark, error)
}

// Errors the API maps to status codes with errors.Is.
var (
	ErrUnknownCard = errors.New("unknown card")
	ErrQueueFull   = errors.New("queue full") // see QueueFullError
	ErrPersistence = errors.New("persistence failing")
	ErrStopping    = errors.New("service stopping")
	ErrNotFound    = errors.New("no such job")
	ErrAmbiguous   = errors.New("ambiguous job id prefix")
	ErrFinished    = errors.New("already finished")
	ErrCardDead    = errors.New("card is dead")
)

// Options configure a Scheduler. Zero values take the defaults noted.
type Options struct {
	// Store holds the durable records. Required.
	Store Store
	// Starts is the start log beside the store (store.OpenStartLog). With
	// it, a card's worker makes a job's start durable there and commits
	// the job's running record while the job runs; without it, every
	// start is committed before its job runs.
	Starts StartLog
	// Devices are the card numbers that get a queue. Required.
	Devices []int
	// OutputDir holds one output file per job. Required.
	OutputDir string
	// Shell is the interpreter prefix; default runner.Shell().
	Shell []string
	// BaseEnv is the service environment jobs start from; default
	// os.Environ(). In system mode, jobs start from their owner's login
	// environment instead and only resets use it.
	BaseEnv []string
	// Mode, in system mode, runs each job as its owner (store.Job.OwnerUID):
	// uid, primary gid and supplementary groups from the user database when
	// it starts, in the owner's login environment (HOME, USER, LOGNAME,
	// SHELL, a default PATH) with the job's forwarded variables on top,
	// never the service's. A job whose owner is unknown fails at start.
	Mode api.Mode
	// ResetAccount, when set, is the user resets and health checks run as
	// (TT_DEVICE_RESET_USER), with its HOME, USER, LOGNAME and SHELL over
	// the service environment, in its home unless Controls.Dir is set; nil
	// runs them as queued's own user.
	ResetAccount *account.Account
	// DefaultTimeout applies when a job asks for none; default TT_DEVICE_DEFAULT_TIMEOUT's.
	DefaultTimeout time.Duration
	// MaxQueued bounds queued jobs over all cards; default TT_DEVICE_MAX_QUEUED_JOBS's.
	MaxQueued int
	// MaxQueuedPerUser bounds the queued jobs (and holds) of one owner
	// (store.Job.OwnerUID) over all cards, so one user cannot take the
	// whole queue; default a quarter of MaxQueued (defaults.Share, as
	// TT_DEVICE_MAX_QUEUED_PER_USER). Jobs with no owner (a user-mode
	// daemon's) and owners Exempt accepts are held only to MaxQueued.
	MaxQueuedPerUser int
	// Exempt reports whether an owner is exempt from the per-user limits
	// (MaxQueuedPerUser, MaxOutputBytesPerUser, MaxCompletedPerUser): the admins. It may read
	// the user database; it is never called with the lock held. Default:
	// root and queued's own user.
	Exempt func(uid uint32) bool
	// MaxLogBytes caps each output file; default TT_DEVICE_MAX_LOG_BYTES's.
	MaxLogBytes int64
	// MaxOutputBytes bounds all output files together; default
	// TT_DEVICE_MAX_OUTPUT_BYTES's (see outputbudget.go).
	MaxOutputBytes int64
	// MaxOutputBytesPerUser bounds the output one owner's finished jobs
	// keep (see outputbudget.go); default a quarter of MaxOutputBytes, at
	// least MaxLogBytes (TT_DEVICE_MAX_OUTPUT_BYTES_PER_USER).
	MaxOutputBytesPerUser int64
	// KillGrace is the time from SIGINT to SIGTERM on the kill ladder;
	// default TT_DEVICE_KILL_GRACE's, negative for none.
	KillGrace time.Duration
	// TermGrace is the time from SIGTERM to SIGKILL on the kill ladder;
	// default TT_DEVICE_TERM_GRACE's, negative for none.
	TermGrace time.Duration
	// DefaultIdleTimeout is the idle timeout of a job submitted without
	// one (TT_DEVICE_IDLE_TIMEOUT); zero leaves such jobs without.
	DefaultIdleTimeout time.Duration
	// JobTasksMax (TT_DEVICE_JOB_TASKS_MAX), when above 0, caps each job
	// at that many processes and threads where jobs get cgroups of their
	// own; 0 leaves them unlimited.
	JobTasksMax int
	// JobOOMScoreAdj (TT_DEVICE_CHILD_OOM_SCORE_ADJ), when set, is every
	// job's oom_score_adj, set before the job runs (not for resets and
	// health checks): the kernel's OOM killer takes a job before queued.
	JobOOMScoreAdj *int
	// RetentionDays and MaxCompleted bound finished jobs; defaults from config (TT_DEVICE_RETENTION_DAYS, TT_DEVICE_MAX_COMPLETED_JOBS).
	RetentionDays int
	MaxCompleted  int
	// MaxCompletedPerUser bounds the finished jobs one owner keeps: past
	// it their own oldest records go, so one user's many jobs never push
	// out another user's (MaxCompleted takes the oldest of everyone's);
	// default a quarter of MaxCompleted (TT_DEVICE_MAX_COMPLETED_JOBS_PER_USER).
	// Jobs with no owner and owners Exempt accepts are held only to
	// MaxCompleted.
	MaxCompletedPerUser int
	// RetentionInterval is the time between retention runs; default 1h.
	RetentionInterval time.Duration
	// RetryMin and RetryMax bound the backoff of the persistence retry
	// loop; defaults 200ms and 5s.
	RetryMin, RetryMax time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// ProcRoot is where /proc is mounted; default "/proc".
	ProcRoot string
	// BootIDPath is read for the boot id recorded on each job and on a
	// dead card (a new boot starts a dead card healthy); default
	// /proc/sys/kernel/random/boot_id.
	BootIDPath string
	// Controls are the reset, health check and deep reset commands.
	// Without Reset and HealthCheck, reset requests fail with ErrNoControls.
	Controls Controls
	// DriverPath is the KMD driver directory whose <card>/pids files list
	// each card's holders; default TT_DEVICE_DRIVER_PATH's.
	DriverPath string
	// WaitForeign (TT_DEVICE_WAIT_FOREIGN) makes a card start no job while
	// a foreign process holds it (see Holder).
	WaitForeign bool
	// ForeignRecheck is how often a card paused by a foreign holder looks
	// again; default 1s.
	ForeignRecheck time.Duration
	// HolderMaxAge is how old a holder scan Status may show; default 1s.
	HolderMaxAge time.Duration
	// SysfsPath is where sysfs is mounted, for each card's PCI address and
	// board (TT_DEVICE_SYSFS_PATH); default /sys.
	SysfsPath string
	// VisibleBDF (TT_DEVICE_VISIBLE=bdf) gives each job TT_VISIBLE_DEVICES,
	// the PCI addresses of its cards read at dispatch, unless the job sets
	// it itself.
	VisibleBDF bool
	// CrossCard (TT_DEVICE_CROSS_CARD) is what happens when a job's
	// process holds a card outside its own: CrossCardWarn (the default)
	// or CrossCardKill. CrossCardInterval is how often running jobs are
	// looked at; default 2 s.
	CrossCard         string
	CrossCardInterval time.Duration
	// SlurmJobGone, when set, tells whether a Slurm job is gone (no such
	// job, or finished), with a word on why; holds taken for a Slurm job
	// whose job is gone end (a node reboot or a slurmd crash skips the
	// Epilog that would release them). It is asked every
	// SlurmCheckInterval (default 60 s) about each active hold's job.
	SlurmJobGone       func(ctx context.Context, slurmJobID string) (gone bool, why string, err error)
	SlurmCheckInterval time.Duration
	// DevDir holds the cards' device nodes (--dev-dir); default
	// /dev/tenstorrent. Once queued has seen the directory, a card whose
	// node is missing is unfit.
	DevDir string
	// GateInterval (TT_DEVICE_GATE_INTERVAL) is how often each card's
	// sampler reads its node, sysfs entry and heartbeat; default 5 s.
	// GateCmd (TT_DEVICE_GATE_CMD), when set, is the site's probe of one
	// card ({device} substituted), run at start and after a job that
	// ended badly, bounded by GateTimeout (default 60 s). See fitness.go.
	GateInterval time.Duration
	GateCmd      string
	GateTimeout  time.Duration
	// RecoveryCooldown (TT_DEVICE_RECOVERY_COOLDOWN) is the least time
	// between two resets queued asks for by itself for a card that stays
	// unfit; default 300 s; below 0, queued never asks.
	RecoveryCooldown time.Duration
	// RecoveryMaxPerHour (TT_DEVICE_RECOVERY_MAX_PER_HOUR) bounds the
	// automatic recovery ladders of one card in any hour; default 3. A
	// user's reset is not bounded.
	RecoveryMaxPerHour int
	// Fence (TT_DEVICE_ENFORCE=acl), when set, gives each job's and each
	// hold's owner its cards' nodes while it runs, and nobody else; see
	// fence.go.
	Fence Fence
	// GateOff turns the fitness gate off: every card counts as fit, as
	// before the gate (for embedding without cards, and for the benchmark
	// that measures what the gate costs a dispatch).
	GateOff bool
	// Logger receives operational messages; default slog.Default().
	Logger *slog.Logger
	// MeterProvider receives the scheduler's metrics (see metrics.go);
	// default a no-op provider, which records nothing and starts nothing.
	MeterProvider metric.MeterProvider
}

func (o *Options) defaults() error {
	if o.Store == nil || len(o.Devices) == 0 || o.OutputDir == "" {
		return errors.New("scheduler: Store, Devices and OutputDir are required")
	}
	if len(o.Shell) == 0 {
		o.Shell = runner.Shell()
	}
	if o.BaseEnv == nil {
		o.BaseEnv = os.Environ()
	}
	if o.ResetAccount != nil && o.Controls.Dir == "" {
		o.Controls.Dir = o.ResetAccount.Home
	}
	setDur := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	// The settings' defaults are package defaults' (config declares the
	// same); the rest are the scheduler's own.
	setDur(&o.DefaultTimeout, defaults.DefaultTimeoutSeconds*time.Second)
	setDur(&o.RetentionInterval, time.Hour)
	setDur(&o.RetryMin, 200*time.Millisecond)
	setDur(&o.RetryMax, 5*time.Second)
	if o.KillGrace < 0 {
		o.KillGrace = 0
	} else if o.KillGrace == 0 {
		o.KillGrace = defaults.KillGraceSeconds * time.Second
	}
	if o.TermGrace < 0 {
		o.TermGrace = 0
	} else if o.TermGrace == 0 {
		o.TermGrace = defaults.TermGraceSeconds * time.Second
	}
	if o.MaxQueued <= 0 {
		o.MaxQueued = defaults.MaxQueuedJobs
	}
	if o.MaxLogBytes <= 0 {
		o.MaxLogBytes = defaults.MaxLogBytes
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = defaults.MaxOutputBytes
	}
	if o.MaxQueuedPerUser <= 0 {
		o.MaxQueuedPerUser = defaults.Share(o.MaxQueued)
	}
	if o.MaxOutputBytesPerUser <= 0 {
		o.MaxOutputBytesPerUser = max(defaults.Share(o.MaxOutputBytes), o.MaxLogBytes)
	}
	if o.Exempt == nil {
		self := uint32(os.Getuid())
		o.Exempt = func(uid uint32) bool { return uid == 0 || uid == self }
	}
	if o.RetentionDays <= 0 {
		o.RetentionDays = defaults.RetentionDays
	}
	if o.MaxCompleted <= 0 {
		o.MaxCompleted = defaults.MaxCompletedJobs
	}
	if o.MaxCompletedPerUser <= 0 {
		o.MaxCompletedPerUser = defaults.Share(o.MaxCompleted)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.BootIDPath == "" {
		o.BootIDPath = "/proc/sys/kernel/random/boot_id"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MeterProvider == nil {
		o.MeterProvider = noop.NewMeterProvider()
	}
	if o.DriverPath == "" {
		o.DriverPath = defaults.DriverPath
	}
	setDur(&o.ForeignRecheck, time.Second)
	setDur(&o.SlurmCheckInterval, defaults.SlurmCheckIntervalSeconds*time.Second)
	setDur(&o.CrossCardInterval, 2*time.Second)
	if o.CrossCard == "" {
		o.CrossCard = defaults.CrossCard
	}
	if o.SysfsPath == "" {
		o.SysfsPath = defaults.SysfsPath
	}
	setDur(&o.HolderMaxAge, time.Second)
	if o.DevDir == "" {
		o.DevDir = defaults.DevDir
	}
	setDur(&o.GateInterval, defaults.GateIntervalSeconds*time.Second)
	setDur(&o.GateTimeout, defaults.GateTimeoutSeconds*time.Second)
	if o.RecoveryCooldown == 0 {
		o.RecoveryCooldown = defaults.RecoveryCooldownSeconds * time.Second
	}
	if o.RecoveryMaxPerHour <= 0 {
		o.RecoveryMaxPerHour = defaults.RecoveryMaxPerHour
	}
	o.Controls.defaults()
	return nil
}

// Scheduler is queued's scheduler: the core (the cards, their FIFO queues
// and state machines, under one lock) and the parts that work on it, each
// a type of its own with its own file: the dispatcher (one worker per
// card, worker.go), the launcher (how a job runs, launch.go), the reset
// desk and runner (reset.go, resetrun.go), restart recovery
// (restart.go), retention (retention.go), the output budget
// (outputbudget.go), the persistence retry (persist.go), the holder watch
// (holders.go), the estimates (estimate.go), the change feed (changes.go)
// and the status report (status.go). Its methods are the API the server
// uses; each hands the request to the part that owns it.
type Scheduler struct {
	core *core
	sub  submitter
	idx  jobIndex
	desk resetDesk
	rep  reporter
	disp dispatcher
	hold holdDesk

	stopOnce sync.Once
}

// New recovers the queues from the store (see the package comment), kills
// leftover process groups of interrupted jobs, then starts one worker per
// card, the persistence retry loop and the retention loop.
func New(opt Options) (*Scheduler, error) {
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opt.OutputDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating output directory: %w", err)
	}
	met, err := newMetrics(opt.MeterProvider)
	if err != nil {
		return nil, err
	}
	c, err := newCore(opt, met)
	if err != nil {
		return nil, err
	}
	s := &Scheduler{core: c, sub: submitter{c}, idx: jobIndex{c}, desk: resetDesk{c}, rep: reporter{c}, disp: dispatcher{c}, hold: holdDesk{c}}
	if err := (restart{c}).run(); err != nil {
		c.holders.close()
		return nil, err
	}
	if err := c.fence.reconcile(c.order); err != nil {
		c.holders.close()
		return nil, err
	}
	c.identify()
	if err := c.met.register(c); err != nil {
		c.holders.close()
		return nil, err
	}
	for _, id := range c.order {
		c.workers.Add(1)
		go s.disp.work(c.cards[id])
	}
	c.loops.Add(4)
	go c.persist.loop()
	go c.retain.loop()
	go (crossWatch{c}).loop()
	go s.hold.expiryLoop()
	c.fit.start()
	if opt.SlurmJobGone != nil {
		c.loops.Add(1)
		go s.hold.slurmLoop()
	}
	return s, nil
}

// DeviceEnvVar carries the job's card number into the job.
const DeviceEnvVar = "TT_QUEUE_DEVICE"

// AgentEnvVar carries, into an agent's job only, the name of the AI agent
// that queued it (api.AgentEnvVar), so the job and otelcol-tt's
// attribution can tell an agent's work from a person's.
const AgentEnvVar = "TT_QUEUE_AGENT"

// Stop refuses new submissions, ends running jobs (the kill ladder: SIGINT,
// SIGTERM, SIGKILL) as interrupted by the service stop, leaves
// queued jobs queued, puts a running reset back in the queue (it is
// retried at the next start on this boot), makes a last attempt to write
// held records (spilling them, see persister.settleAtStop, when it fails)
// and returns when every goroutine has ended. A second Stop is a no-op.
func (s *Scheduler) Stop() {
	s.stopOnce.Do(func() {
		c := s.core
		c.mu.Lock()
		c.stopping = true
		for _, id := range c.order {
			cd := c.cards[id]
			if cd.current != nil {
				cd.current.stopFor(stopService)
			}
			cd.wakeup()
		}
		c.mu.Unlock()
		c.fit.close()
		c.workers.Wait()
		close(c.quit)
		c.loops.Wait()
		c.persist.settleAtStop()
		c.holders.close()
		c.met.unregister()
	})
}
