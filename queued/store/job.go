package store

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// Kind tells an ordinary job from a card reset, which runs at the head of
// its card's queue.
type Kind string

// Job kinds.
const (
	KindJob   Kind = "job"
	KindReset Kind = "reset"
	// KindHold takes its cards in their FIFO turn, like a job, and keeps
	// them, running nothing, until released, expired, or (for a hold
	// taken for a Slurm job) its Slurm job is gone.
	KindHold Kind = "hold"
)

// State is where a job is in its life: queued -> running -> done.
type State string

// Job states.
const (
	StateQueued  State = "queued"
	StateRunning State = "running"
	StateDone    State = "done"
)

// Outcome classifies how a done job ended, for people reading status and for
// metrics by outcome; the exit code alone cannot tell a timeout from a kill.
type Outcome string

// Outcomes.
const (
	OutcomeSuccess Outcome = "success" // every iteration exited 0
	OutcomeFailure Outcome = "failure" // an iteration exited non-zero or could not start
	OutcomeTimeout Outcome = "timeout" // an iteration ran past its timeout and was killed (-9)
	OutcomeKilled  Outcome = "killed"  // stopped by a kill request, queued or running
	// OutcomeInterrupted is a job ended by a service stop or restart, or by a
	// reset of its card; it is never run again.
	OutcomeInterrupted Outcome = "interrupted"
	OutcomeCardDead    Outcome = "card_dead" // failed because its card is dead
	OutcomeReleased    Outcome = "released"  // a hold released, by request or because its Slurm job is gone
	OutcomeExpired     Outcome = "expired"   // a hold that reached its expiry
	// OutcomeHung is a job that wrote no output for its idle timeout and
	// was stopped for it (exit code -124; see docs/job-endings.md).
	OutcomeHung Outcome = "hung"
	// OutcomeDependency is a job that never ran because the job it was
	// queued after (Job.After) ended in a way its AfterMode does not
	// accept, or is unknown; Error names that job.
	OutcomeDependency Outcome = "dependency"
)

// AfterMode says which ending of the jobs a job waits for (Job.After)
// lets it run, as Slurm's --dependency=afterok|afternotok|afterany.
type AfterMode string

// After modes; an empty mode on a record reads as AfterOK.
const (
	AfterOK    AfterMode = "ok"    // each must end with outcome success
	AfterNotOK AfterMode = "notok" // each must end any other way
	AfterAny   AfterMode = "any"   // each must end, however it ends
)

// Accepts reports whether a job of mode m may run after a job that ended
// with outcome o.
func (m AfterMode) Accepts(o Outcome) bool {
	switch m {
	case AfterNotOK:
		return o != OutcomeSuccess
	case AfterAny:
		return true
	}
	return o == OutcomeSuccess
}

// Job is one stored job record. Fields are only ever added, so older
// records decode into newer builds; a record written without Device (an
// older schema) belongs to card 0.
type Job struct {
	ID     string `json:"id"`
	Seq    uint64 `json:"seq"`
	Kind   Kind   `json:"kind"`
	Device *int   `json:"device,omitempty"`
	// Devices lists every card of a job that spans several, ascending
	// (Device is the first of them); empty for a job of one card.
	Devices []int `json:"devices,omitempty"`
	// DeviceSpec is the card list as the submitter wrote it ("0,1",
	// "0-3"), what the job sees in TT_QUEUE_DEVICE; empty for one card.
	DeviceSpec string `json:"device_spec,omitempty"`

	// Cmd is the job's shell program; on a brief record (see Briefed),
	// its first PreviewBytes when CmdBytes says it is longer.
	Cmd string `json:"cmd"`
	Cwd string `json:"cwd"`
	// Env is the variables added to the job's environment; a brief
	// record leaves them out (EnvVars and EnvBytes say how many and how
	// large they are), as it leaves out EnvFromShell.
	Env      map[string]string `json:"env,omitempty"`
	Timeout  int64             `json:"timeout_sec"` // the whole job's, every iteration together; already defaulted
	Repeat   int               `json:"repeat"`
	ClientID string            `json:"client_id,omitempty"`
	// IdleTimeout is how long, in seconds, the job may write no output
	// before it is ended as hung; 0 means never (already defaulted).
	IdleTimeout int64 `json:"idle_timeout_sec,omitempty"`
	// Retries is how many times the job is run again when it ends
	// because of its card (hung, interrupted by a reset, or failed on a
	// card the gate then finds unfit), at most
	// api.MaxRetries; Attempt is the current attempt, from 1 (0 in a
	// record written before retries were, which reads as 1); Attempts
	// holds how each earlier attempt ended.
	Retries  int       `json:"retries,omitempty"`
	Attempt  int       `json:"attempt,omitempty"`
	Attempts []Attempt `json:"attempts,omitempty"`
	// Agent is the AI agent that queued the job through tt-device-queue
	// mcp (its MCP client's name), empty for a person's job; the job sees
	// it in TT_QUEUE_AGENT.
	Agent string `json:"agent,omitempty"`

	// After lists the jobs (whole ids) this one waits for: it keeps its
	// FIFO place but starts only once each has ended as AfterMode
	// accepts, and ends with OutcomeDependency once one cannot. Stored,
	// so the wait survives a restart.
	After     []string  `json:"after,omitempty"`
	AfterMode AfterMode `json:"after_mode,omitempty"`

	// ArrayID is, on an element of an array (queue --array), the id the
	// array's elements share, and ArrayIndex its index: the job sees both
	// (TT_QUEUE_ARRAY_ID, TT_QUEUE_ARRAY_INDEX). Empty on other jobs.
	ArrayID    string `json:"array_id,omitempty"`
	ArrayIndex int    `json:"array_index,omitempty"`

	// OwnerUID is, in system mode, the submitter's uid as the kernel gave
	// it (SO_PEERCRED on the socket; the daemon's own uid for a token
	// holder over TCP): the job runs as this user. On a reset it is who
	// asked for it (resets run as root or TT_DEVICE_RESET_USER). Nil on a
	// user-mode daemon, where every job is its one user's.
	OwnerUID *uint32 `json:"owner_uid,omitempty"`
	// Owner is the submitter's user name when the job was submitted, for
	// people reading status; the uid is what counts.
	Owner string `json:"owner,omitempty"`

	// ImportSource is, on a record an import of another tool's database
	// made, that database (its absolute path): only a later import of
	// the same database may update the record, and never its owner.
	// Empty on queued's own jobs.
	ImportSource string `json:"import_source,omitempty"`
	// LegacyID is, on an imported record, the job's id in the database
	// it came from. It differs from ID where that id was already another
	// record's: an import never takes over a stored job's id.
	LegacyID string `json:"legacy_id,omitempty"`

	// EnvFromShell names the entries of Env the CLI took from the
	// submitter's shell (sorted); the rest were given with --env.
	EnvFromShell []string `json:"env_from_shell,omitempty"`

	State       State     `json:"state"`
	SubmittedAt time.Time `json:"submitted_at"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	FinishedAt  time.Time `json:"finished_at,omitzero"`

	ExitCode   *int    `json:"exit_code,omitempty"`
	Outcome    Outcome `json:"outcome,omitempty"`
	Error      string  `json:"error,omitempty"`
	Iterations int     `json:"iterations,omitempty"` // iterations started
	// KillRung is the last signal of the kill ladder the job was sent
	// ("SIGINT", "SIGTERM", "SIGKILL"), empty when it was not stopped: a
	// job that needed SIGKILL may have left its card wedged.
	KillRung string `json:"kill_rung,omitempty"`

	LogBytes        int64 `json:"log_bytes,omitempty"`
	LogTruncated    bool  `json:"log_truncated,omitempty"`
	DroppedLogBytes int64 `json:"dropped_log_bytes,omitempty"`
	// LogError is the first error writing the output file (a full disk);
	// output after it was dropped, the job itself was not disturbed.
	LogError string `json:"log_error,omitempty"`
	// LogCutAt and LogCutBytes say where output past the limit was cut:
	// the file holds the first LogCutAt bytes, a marker, then the tail;
	// LogCutBytes bytes between them were left out (runner.Layout). Zero
	// when the file holds the output as it was written.
	LogCutAt    int64 `json:"log_cut_at,omitempty"`
	LogCutBytes int64 `json:"log_cut_bytes,omitempty"`
	// OutputDeletedAt is when the output file was deleted to keep all
	// jobs' output within the daemon's budget (TT_DEVICE_MAX_OUTPUT_BYTES);
	// LogBytes and the rest still say what it held. Zero while it exists.
	OutputDeletedAt time.Time `json:"output_deleted_at,omitzero"`

	// PGID and LeaderStart identify the process group of the current
	// iteration (LeaderStart: field 22 of /proc/<pid>/stat), so a restarted
	// daemon kills a leftover group only if it is still the same one.
	PGID        int    `json:"pgid,omitempty"`
	LeaderStart uint64 `json:"leader_start,omitempty"`
	// BootID is /proc/sys/kernel/random/boot_id when the job started; a
	// reset job records it when requested, so one left over from an
	// earlier boot is not retried after a reboot.
	BootID string `json:"boot_id,omitempty"`
	// ResetEpoch is its card's reset count when the job started, so a
	// job-based reset can tell whether the card was reset since; for a job
	// of several cards, ResetEpochs holds each card's, in Devices' order.
	ResetEpoch  uint64   `json:"reset_epoch,omitempty"`
	ResetEpochs []uint64 `json:"reset_epochs,omitempty"`

	// CrossCards lists the cards outside its own that a process of the job
	// was seen to hold (tt-metal opens every card it sees).
	CrossCards []int `json:"cross_cards,omitempty"`

	// A hold's reason, the time it ends by itself (zero: never) and the
	// Slurm job it was taken for (it ends when that job is gone).
	Reason     string    `json:"reason,omitempty"`
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
	SlurmJobID string    `json:"slurm_job_id,omitempty"`

	// What a brief record leaves out of the job's spec (see spec.go):
	// the whole command's length and SHA-256 (hex) when Cmd is cut, and
	// the number and size (EnvSize) of Env's variables.
	CmdBytes  int    `json:"cmd_bytes,omitempty"`
	CmdSHA256 string `json:"cmd_sha256,omitempty"`
	EnvVars   int    `json:"env_vars,omitempty"`
	EnvBytes  int    `json:"env_bytes,omitempty"`
	// Brief says this is the record without its spec, as jobs/ holds it:
	// Cmd may be a preview, Env and EnvFromShell are left out. Writing a
	// brief record never touches the stored spec. Not stored.
	Brief bool `json:"-"`
}

// Card returns the job's card (the first of several), 0 for records
// written without one.
func (j *Job) Card() int {
	if j.Device == nil {
		return 0
	}
	return *j.Device
}

// Cards returns every card of the job, ascending: Devices, or its one
// card.
func (j *Job) Cards() []int {
	if len(j.Devices) > 0 {
		return j.Devices
	}
	return []int{j.Card()}
}

// Spans reports whether the job takes several cards at once.
func (j *Job) Spans() bool { return len(j.Devices) > 1 }

// DeviceText is how the job's cards read in TT_QUEUE_DEVICE and answers:
// the spec as given for a job of several cards, else its one card.
func (j *Job) DeviceText() string {
	if j.DeviceSpec != "" {
		return j.DeviceSpec
	}
	if len(j.Devices) > 1 {
		parts := make([]string, len(j.Devices))
		for i, d := range j.Devices {
			parts[i] = strconv.Itoa(d)
		}
		return strings.Join(parts, ",")
	}
	return strconv.Itoa(j.Card())
}

// Card is the durable state of one card: whether it is dead, how many
// resets it has completed, and how the last one ended. Fields are only
// ever added, like Job's.
type Card struct {
	ID int `json:"id"`
	// State is "healthy" or "dead"; resetting is never stored, a reset in
	// progress is a running reset job.
	State string `json:"state"`
	// DeadBootID is the boot on which the card was marked dead; a new boot
	// starts it healthy.
	DeadBootID string    `json:"dead_boot_id,omitempty"`
	DeadReason string    `json:"dead_reason,omitempty"`
	DeadSince  time.Time `json:"dead_since,omitzero"`
	// ResetEpoch counts completed resets of the card. Every job records
	// the epoch it started in (Job.ResetEpoch), so a job-based reset can
	// tell whether the card has been reset since that job ran.
	ResetEpoch  uint64    `json:"reset_epoch"`
	LastResetAt time.Time `json:"last_reset_at,omitzero"`
	LastResetID string    `json:"last_reset_id,omitempty"`
	// LastResetResult is "ok" (the health check passed) or "failed" (the
	// card was marked dead); LastResetDetail says what happened.
	LastResetResult string `json:"last_reset_result,omitempty"`
	LastResetDetail string `json:"last_reset_detail,omitempty"`
}

// Card states as stored.
const (
	CardHealthy = "healthy"
	CardDead    = "dead"
)

// IDLen is the length of a job id: 128 random bits as lowercase hex.
const IDLen = 32

// NewID returns a fresh job id.
func NewID() string {
	var b [IDLen / 2]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b[:])
}

// ValidID reports whether s is a complete job id.
func ValidID(s string) bool {
	return len(s) == IDLen && IsHex(s)
}

// IsHex reports whether s is non-empty lowercase hex.
func IsHex(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
