package api

import "time"

// GET /status: every card, its running job, queue and holders, and the
// daemon's own health.

// JobSummary is a job as GET /status lists it.
type JobSummary struct {
	ID string `json:"id"`
	// Kind is job, reset or hold.
	Kind string `json:"kind,omitempty"`
	// Devices lists the cards of a job that takes several.
	Devices  []int  `json:"devices,omitempty"`
	Cmd      string `json:"cmd"` // cut to 200 bytes
	ClientID string `json:"client_id,omitempty"`
	// Agent is the AI agent that queued the job, as in Job.
	Agent string `json:"agent,omitempty"`
	// OwnerUID and Owner: the submitter, as in Job.
	OwnerUID *uint32 `json:"owner_uid,omitempty"`
	Owner    string  `json:"owner,omitempty"`
	Repeat   int     `json:"repeat"`
	// Attempt and Retries: the job's attempt, of Retries+1, when it may
	// run again after its card ends it (docs/job-endings.md); absent for
	// a job without retries.
	Attempt int `json:"attempt,omitempty"`
	Retries int `json:"retries,omitempty"`
	// WaitsFor lists the jobs a queued job waits for (QueueRequest.After)
	// that have not ended yet: it is passed over until they have.
	WaitsFor []string `json:"waits_for,omitempty"`
	// Position is 1 for the next job; 0 for the running one.
	Position int `json:"position,omitempty"`
	// EstimatedWaitSec is the expected wait (queued) or remaining run
	// time (running).
	EstimatedWaitSec float64 `json:"estimated_wait_sec"`
	// EstimatedRunSec is how long the whole job (every repeat) is
	// expected to run.
	EstimatedRunSec float64    `json:"estimated_run_sec"`
	EstimateKnown   bool       `json:"estimate_known,omitempty"`
	OverdueSec      float64    `json:"overdue_sec,omitempty"`
	SubmittedAt     time.Time  `json:"submitted_at"`
	StartedAt       *time.Time `json:"started_at,omitempty"`
	PID             int        `json:"pid,omitempty"`
}

// Status answers GET /status.
type Status struct {
	// Version is the daemon's build (see tt-device-queue --version).
	Version   string       `json:"version,omitempty"`
	Cards     []CardStatus `json:"cards"`
	Queued    int          `json:"queued"`
	MaxQueued int          `json:"max_queued"`
	// MaxQueuedPerUser is how many of them one user may have
	// (TT_DEVICE_MAX_QUEUED_PER_USER; a system-mode daemon's bound).
	MaxQueuedPerUser int `json:"max_queued_per_user,omitempty"`
	// MaxCompletedPerUser is how many finished jobs one user keeps
	// (TT_DEVICE_MAX_COMPLETED_JOBS_PER_USER; a system-mode daemon's bound).
	MaxCompletedPerUser int         `json:"max_completed_per_user,omitempty"`
	Stopping            bool        `json:"stopping,omitempty"`
	Persistence         Persistence `json:"persistence"`
	Retention           Retention   `json:"retention"`
	Output              Output      `json:"output"`
	HTTP                HTTPStatus  `json:"http"`
	Warnings            []string    `json:"warnings,omitempty"`
	// Mode is "user" (one account's daemon, today's default) or "system"
	// (one root daemon for every user of the host, each job run as its
	// submitter); empty from a daemon older than modes, which is user
	// mode (see ParseMode).
	Mode Mode `json:"mode,omitempty"`
	// VisibleDevices is TT_DEVICE_VISIBLE: "bdf" when each job gets
	// TT_VISIBLE_DEVICES naming its cards, "off" (or empty, from an older
	// daemon) when queued leaves the variable alone.
	VisibleDevices string `json:"visible_devices,omitempty"`
	// JobTracking says what holds each job's processes, so that a kill
	// reaches every one of them: a cgroup of its own where queued's is
	// delegated, else its process group, session, audit session and
	// marker, which miss more (doctor says what). Nil from an older
	// daemon.
	JobTracking *JobTracking `json:"job_tracking,omitempty"`
	// Caller is who the daemon took the request to come from: the uid
	// the kernel reported on the socket, or the daemon's own user for a
	// token holder over TCP. Admin says whether it may act on every
	// user's jobs.
	Caller *Caller `json:"caller,omitempty"`

	PythonStatus
}

// Caller is the requesting user as the daemon identified it.
type Caller struct {
	UID   uint32 `json:"uid"`
	User  string `json:"user,omitempty"`
	Admin bool   `json:"admin,omitempty"`
}

// CardStatus is one card in GET /status.
type CardStatus struct {
	DeviceID string `json:"device_id"`
	// State is healthy; unfit while the fitness gate holds the card's
	// jobs (they stay queued); recovering while a reset runs on it; dead
	// after a failed recovery. A daemon older than the gate says
	// resetting for recovering.
	State string `json:"state"`
	// Reason says why the card is not healthy: why it is unfit (such as
	// "heartbeat stalled since 10:42:03" or "gate command exited 3: ...")
	// or dead; empty when healthy.
	Reason string `json:"reason,omitempty"`
	// UnfitSince is since when the gate holds the card's jobs.
	UnfitSince *time.Time `json:"unfit_since,omitempty"`
	// Worker is running, idle, dispatching, stopped, "paused: <why>", or
	// "waiting: <why>" while a job of several cards at the head of the
	// queue waits for the others.
	Worker string `json:"worker"`
	// WaitingSince is when the card began to stand idle for such a job
	// (what strict FIFO costs it), while Worker says waiting.
	WaitingSince *time.Time   `json:"waiting_since,omitempty"`
	Current      *JobSummary  `json:"current"`
	Pending      []JobSummary `json:"pending"`
	// EstimatedWaitSec is the expected wait of a job submitted now.
	EstimatedWaitSec float64 `json:"estimated_wait_sec"`

	// Reset is the card's pending or running reset, nil when none.
	Reset *ResetInfo `json:"reset,omitempty"`
	// LastReset is the card's last finished reset, nil when none.
	LastReset *ResetInfo `json:"last_reset,omitempty"`
	// DeadReason and DeadSince are set while State is dead.
	DeadReason string     `json:"dead_reason,omitempty"`
	DeadSince  *time.Time `json:"dead_since,omitempty"`
	// Rung is the rung of the recovery ladder running on the card, with
	// its place on the ladder, such as "deep reset (2/3)"; empty when none
	// runs. Each rung is verified by the health check and the gate.
	Rung string `json:"rung,omitempty"`
	// Recovery says why the card's recovery does not go on: its reset
	// waits for someone else's process holding the card ("recovery
	// waiting: card 1 held by pid 4242 (alice: python3 train.py)"), or
	// queued's automatic ladders of the unfit card reached their bound
	// per hour; empty otherwise.
	Recovery string `json:"recovery,omitempty"`

	// Foreign lists processes holding the card's device that are not jobs
	// of this queue, from the KMD's view at most about a second old.
	Foreign []Holder `json:"foreign,omitempty"`
	// ForeignError says why the holder list may be incomplete.
	ForeignError string `json:"foreign_error,omitempty"`
	// ForeignWait is TT_DEVICE_WAIT_FOREIGN: the card starts no job while
	// a foreign process holds it.
	ForeignWait bool `json:"foreign_wait,omitempty"`
	// PausedReason repeats why Worker is paused, such as
	// "foreign holder pid 4242 (python3 train.py)"; empty when not paused.
	PausedReason string `json:"paused_reason,omitempty"`

	// The card as sysfs names it: its type (tt_card_type: n300, p150a),
	// serial, ASIC id (tt_asic_id) and PCI address; empty where the
	// driver gives none.
	CardType   string `json:"card_type,omitempty"`
	Serial     string `json:"serial,omitempty"`
	ASICID     string `json:"asic_id,omitempty"`
	PCIAddress string `json:"pci_address,omitempty"`
	// CrossCard lists, one line each, the running jobs of other cards
	// seen holding this one: "job 3fed... on card 1 also opened card 0:
	// tt-metal opens every card it sees; ...".
	CrossCard []string `json:"cross_card,omitempty"`
}

// Persistence says whether the store takes writes.
type Persistence struct {
	OK          bool       `json:"ok"`
	Error       string     `json:"error,omitempty"`
	Since       *time.Time `json:"since,omitempty"`
	HeldRecords int        `json:"held_records"`
	Attempts    int        `json:"attempts"`
}

// Retention describes the last retention run.
type Retention struct {
	LastRun *time.Time `json:"last_run,omitempty"`
	Deleted int        `json:"deleted"`
	Warning string     `json:"warning,omitempty"`
}

// Output is the job output kept on disk against its budget.
type Output struct {
	// Bytes is the size of every output file, the running jobs' included.
	Bytes int64 `json:"bytes"`
	// MaxBytes is TT_DEVICE_MAX_OUTPUT_BYTES.
	MaxBytes int64 `json:"max_bytes"`
	// Deleted counts finished jobs whose output was deleted since start
	// to stay within MaxBytes.
	Deleted int    `json:"deleted"`
	Warning string `json:"warning,omitempty"`
	// MaxBytesPerUser is what one user's finished jobs may keep
	// (TT_DEVICE_MAX_OUTPUT_BYTES_PER_USER); Users lists whose finished
	// jobs keep the most, most first: whose output fills the budget.
	MaxBytesPerUser int64        `json:"max_bytes_per_user,omitempty"`
	Users           []UserOutput `json:"users,omitempty"`
}

// UserOutput is the output one user's finished jobs keep.
type UserOutput struct {
	UID   uint32 `json:"uid"`
	User  string `json:"user"`
	Bytes int64  `json:"bytes"`
}

// HTTPStatus shows the handler limit at work.
type HTTPStatus struct {
	// Workers is TT_DEVICE_HTTP_WORKERS.
	Workers int `json:"workers"`
	// Busy counts handlers working now.
	Busy int `json:"busy"`
	// Waiting counts requests waiting for a free handler.
	Waiting int `json:"waiting"`
	// LongPolls counts long-polls waiting for output or a result; they
	// hold no handler.
	LongPolls int `json:"long_polls"`
	// Conns counts the open connections; MaxConns is their bound
	// (TT_DEVICE_HTTP_MAX_CONNS).
	Conns    int `json:"conns"`
	MaxConns int `json:"max_conns"`
	// Evicted counts connections closed since start to make room at the
	// bound (idle, or slow to send their request); Refused counts
	// connections answered 503 and closed at a bound: new ones because
	// every open connection was busy, and streams past their user's
	// bound (also in StreamsRefused).
	Evicted int64 `json:"evicted"`
	Refused int64 `json:"refused"`
	// AnsweredEarly counts long-polls answered before their wait ran out
	// to make room: for a new connection at a bound, or for a newer
	// long-poll of the same user past WaitsPerUser.
	AnsweredEarly int64 `json:"answered_early"`
	// The per-user bounds (system mode; TT_DEVICE_HTTP_*_PER_USER) and
	// the connections and handlers kept for root, queued's own user and
	// the admins, whom no per-user bound holds.
	ConnsPerUser    int `json:"conns_per_user,omitempty"`
	WorkersPerUser  int `json:"workers_per_user,omitempty"`
	WaitsPerUser    int `json:"long_polls_per_user,omitempty"`
	ReservedConns   int `json:"reserved_conns,omitempty"`
	ReservedWorkers int `json:"reserved_workers,omitempty"`
	// Streams counts the long-lived requests open (long-polls of logs -f,
	// run, wait and the page's change feed); StreamsBusy the handlers of
	// their own working for them (apart from Busy: a stream never takes
	// a handler a short request needs); StreamsRefused the streams
	// refused since start because their user had WaitsPerUser open.
	Streams        int   `json:"streams"`
	StreamsBusy    int   `json:"streams_busy"`
	StreamsRefused int64 `json:"streams_refused"`
}

// JobTracking is how a daemon finds each job's processes.
type JobTracking struct {
	// Cgroup is set when each job runs in a cgroup of its own (queued's
	// cgroup is delegated): a kill reaches every process the job started
	// itself, whatever it did to its session, group or environment.
	Cgroup bool `json:"cgroup"`
	// AuditSession is set when each job gets an audit session of its own,
	// which finds, without a cgroup, its processes that left its session
	// and dropped its marker.
	AuditSession bool `json:"audit_session"`
	// Detail says why either is missing.
	Detail string `json:"detail,omitempty"`
}
