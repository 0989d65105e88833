// Package api is queued's HTTP interface as clients see it: the request
// and response types (shared with the server in queued/server, so the wire
// format is defined once), the typed Go client the tt-device-queue CLI
// uses, and the token and address files in the state directory. It has no
// dependency on the daemon's internals.
package api

import (
	"encoding/json"
	"time"
)

// KillRequest is the body of POST /kill. With JobID, that job is
// stopped. Without it, as the Python tt-device-queue's kill without an id,
// the caller's running job is: the running jobs (on DeviceID's card when
// given) that are the caller's (on a system-mode daemon those it
// submitted; on a user-mode daemon every job is its user's), narrowed by
// ClientID when that leaves exactly one. Exactly one must remain; none
// answers 200 {"error": "Nothing running"} as the Python tool does (with
// the running jobs in "running"), several answer 409 naming them.
type KillRequest struct {
	// JobID is a job id or a unique prefix of at least 6 characters.
	JobID    string `json:"job_id,omitempty"`
	DeviceID string `json:"device_id,omitempty"`
	ClientID string `json:"client_id,omitempty"`
}

// Killed is what POST /kill stopped, in the Python tt-device-queue's
// words: the job, its command (cut to 120 bytes) and the signal sent to
// its process group, "SIGINT" for a running job and null for a queued one,
// which is only removed from its queue.
type Killed struct {
	ID     string  `json:"id"`
	Cmd    string  `json:"cmd"`
	Signal *string `json:"signal"`
}

// NothingRunning is POST /kill's answer when no job id was given and the
// caller has no running job: status 200 with "error": "Nothing running",
// as the Python tt-device-queue answers, and the running jobs of the cards
// asked about that are not the caller's, so a client can say whose they
// are.
type NothingRunning struct {
	Error   string `json:"error"`
	Running []Job  `json:"running"`
}

// NothingRunningMessage is NothingRunning's Error, word for word the
// Python tool's.
const NothingRunningMessage = "Nothing running"

// ResetRequest is the body of POST /reset. Set DeviceID to reset one card,
// JobID to reset the card that job ran on (skipped when the card has been
// reset since the job started), or neither to reset every card.
type ResetRequest struct {
	// DeviceID is the card number; the server also accepts a JSON integer.
	DeviceID string `json:"device_id,omitempty"`
	// JobID is a job id or a unique prefix of at least 6 characters.
	JobID string `json:"job_id,omitempty"`
	// NoInterrupt lets the card's running job finish before the reset
	// runs; by default the reset stops it (the kill ladder: SIGINT, SIGTERM,
	// SIGKILL, see docs/job-endings.md) and the job ends as interrupted.
	NoInterrupt bool `json:"no_interrupt,omitempty"`
	// ClientID is accepted, and not used, for the Python tt-device-queue's
	// clients, which may send it.
	ClientID string `json:"client_id,omitempty"`
	// Force lets the reset interrupt a hold on the card instead of waiting
	// for its release, and run under another user's process holding the
	// card instead of waiting for it to go (the reset's log names who
	// forced it); admins only (403 otherwise).
	Force bool `json:"force,omitempty"`
}

// ResetResponse answers POST /reset at once, before any reset has run:
// one entry per card the request touched. Follow a reset with GET
// /status (the card's Reset and LastReset), GET /result/<reset_job_id>
// and GET /logs/<reset_job_id>.
type ResetResponse struct {
	Resets []ResetEntry `json:"resets"`

	// The Python tt-device-queue's keys, for the request as a whole:
	// Action is the strongest of the entries' actions (scheduled, then
	// joined, then already_reset); DeviceState and ResetEpoch are the
	// first card's state and completed resets when the request came; Hint
	// is the Python tool's sentence for Action.
	Action      string `json:"action"`
	DeviceState string `json:"device_state"`
	ResetEpoch  uint64 `json:"reset_epoch"`
	Hint        string `json:"hint"`
}

// Reset actions, the Python tt-device-queue's words for what a reset
// request did on a card.
const (
	ResetScheduled    = "scheduled"     // a new reset was queued
	ResetJoined       = "joined"        // a reset already pending took the request in
	ResetAlreadyReset = "already_reset" // the card was reset since the job ran; nothing queued
)

// ResetEntry is what a reset request did on one card.
type ResetEntry struct {
	DeviceID string `json:"device_id"`
	// Action is scheduled, joined or already_reset (see ResetScheduled).
	Action string `json:"action"`
	// ResetJobID is the reset job that will recover the card: a new one,
	// or the pending one this request coalesced into. Empty when skipped.
	ResetJobID string `json:"reset_job_id,omitempty"`
	// State is the reset job's state (queued or running); empty when
	// skipped.
	State string `json:"state,omitempty"`
	// Coalesced means a reset of the card was already queued or running
	// and this request joined it instead of adding another.
	Coalesced bool `json:"coalesced,omitempty"`
	// Skipped means no reset was scheduled; Reason says why, such as
	// "card 0 was reset since job 1f2e... ran".
	Skipped bool   `json:"skipped,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// InterruptedJobID is the running job this reset is stopping, if any.
	InterruptedJobID string `json:"interrupted_job_id,omitempty"`
	// WaitsForJobID is the running job this reset waits for instead of
	// interrupting it: on a shared (system-mode) daemon only the job's
	// owner and admins may interrupt it. WaitsForOwner is its owner.
	WaitsForJobID string `json:"waits_for_job_id,omitempty"`
	WaitsForOwner string `json:"waits_for_owner,omitempty"`
	// OnHold says WaitsForJobID or InterruptedJobID is a hold: the reset
	// waits for its release, or (forced) ends it.
	OnHold bool `json:"on_hold,omitempty"`
}

// Holder is a process holding a card's device that is not the job running
// on that card's queue (it bypassed the queue, was queued for another
// card, or outlived its job), as the KMD lists it. PID 0 stands for
// holders outside queued's PID namespace.
type Holder struct {
	PID          int    `json:"pid"`
	FriendlyName string `json:"friendly_name"`
	CommandLine  string `json:"command_line"`
	// JobID is the running job of another card's queue the process was
	// proven to belong to: by its cgroup, or by its session or parent chain
	// and its user; never by its environment alone.
	JobID string `json:"job_id,omitempty"`
	// ClaimedJobID is the TT_QUEUE_JOB_ID in its environment when that is
	// not JobID: a leftover of a finished job, a job's process that left
	// the job, or a forgery. It is what the process says of itself, shown
	// so people can look, never believed.
	ClaimedJobID string `json:"claimed_job_id,omitempty"`
}

// ResetInfo describes one reset job of a card: the pending or running one
// (Result empty) or the last finished one.
type ResetInfo struct {
	JobID string `json:"job_id"`
	// State is queued, running or done.
	State string `json:"state"`
	// Result is set when done: ok (the health check passed) or failed
	// (recovery failed and the card was marked dead). A reset interrupted
	// by a service stop is not done: it is queued again and retried.
	Result string `json:"result,omitempty"`
	// Detail is a one-line account, such as which command failed.
	Detail string `json:"detail,omitempty"`
	// At is when the reset was requested (pending), started (running) or
	// finished (done).
	At time.Time `json:"at"`
}

// Job is a job's full record, answered by GET /job/<id>, GET /result/<id>
// and POST /kill.
type Job struct {
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	DeviceID string `json:"device_id"` // the card, or a job's cards as given ("0,1")
	// Devices lists the cards of a job (or hold) that takes several.
	Devices []int `json:"devices,omitempty"`
	// CrossCards lists cards outside its own that a process of the job
	// was seen to hold (tt-metal opens every card it sees).
	CrossCards []int `json:"cross_cards,omitempty"`
	// A hold's reason, expiry and Slurm job.
	Reason     string     `json:"reason,omitempty"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	SlurmJobID string     `json:"slurm_job_id,omitempty"`

	// Cmd is the job's shell program. In a list (GET /jobs) it is a
	// preview of at most 256 bytes when CmdTruncated says so; GET /job
	// has it whole.
	Cmd string `json:"cmd"`
	// CmdTruncated says Cmd is a preview; CmdBytes is the whole
	// command's length.
	CmdTruncated bool   `json:"cmd_truncated,omitempty"`
	CmdBytes     int    `json:"cmd_bytes,omitempty"`
	Cwd          string `json:"cwd"`
	// Env is the variables added to the job's environment, in GET /job;
	// a list leaves them out. EnvVars and EnvBytes say how many there
	// are and their size (as EnvBytes counts it), in both.
	Env      map[string]string `json:"env,omitempty"`
	EnvVars  int               `json:"env_vars,omitempty"`
	EnvBytes int               `json:"env_bytes,omitempty"`
	Timeout  int64             `json:"timeout"`
	Repeat   int               `json:"repeat"`
	ClientID string            `json:"client_id"`
	// Agent is the AI agent that queued the job (QueueRequest.Agent);
	// empty for a person's job.
	Agent string `json:"agent,omitempty"`
	// OwnerUID and Owner are, on a system-mode daemon, the submitter's
	// uid (from the kernel, never from the request) and its user name:
	// the job runs as that user (for a reset: who asked for it). Absent
	// on a user-mode daemon, whose jobs are all its user's.
	OwnerUID *uint32 `json:"owner_uid,omitempty"`
	Owner    string  `json:"owner,omitempty"`
	// LegacyID is, on a job imported from the Python tt-device-queue's
	// database, its id there. It differs from ID where that id was
	// already another job's in queued's store (the import gave the job a
	// new one); it is not an id requests accept.
	LegacyID string `json:"legacy_id,omitempty"`
	// EnvFromShell names the entries of Env that came from the
	// submitter's shell (sorted); the others were given with --env.
	EnvFromShell []string `json:"env_from_shell,omitempty"`

	// State is queued, running or done.
	State string `json:"state"`
	// Position and EstimatedWaitSec are set while queued (0 otherwise).
	Position         int     `json:"position"`
	EstimatedWaitSec float64 `json:"estimated_wait_sec"`
	// EstimatedRemainingSec is set while running (0 otherwise).
	EstimatedRemainingSec float64 `json:"estimated_remaining_sec"`
	// EstimatedRunSec, set while queued or running, is how long the whole
	// job (every repeat) is expected to run, learned from the card's
	// history.
	EstimatedRunSec float64 `json:"estimated_run_sec,omitempty"`
	// EstimateKnown says EstimatedRunSec comes from this command's own
	// earlier runs on the card; without it the figure is the card's usual
	// run time, a guess.
	EstimateKnown bool `json:"estimate_known,omitempty"`
	// OverdueSec, while running, is how far the current iteration is past
	// its estimate.
	OverdueSec float64 `json:"overdue_sec,omitempty"`

	SubmittedAt time.Time `json:"submitted_at"`
	// StartedAt and FinishedAt are null until the job started, ended.
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`

	// ExitCode is null until done; a signal N is -N, -9 after a timeout,
	// -124 when hung (no output for its idle timeout), -1 when
	// interrupted by a service stop or restart or never started.
	ExitCode *int `json:"exit_code"`
	// Outcome is success, failure, timeout, hung, killed, interrupted,
	// card_dead, or dependency (never ran: the jobs of After did not end
	// as AfterMode needs; Error names the job).
	Outcome    string `json:"outcome,omitempty"`
	Error      string `json:"error,omitempty"`
	Iterations int    `json:"iterations"`
	// KillRung is the last signal of the kill ladder the job was sent
	// (SIGINT, SIGTERM, SIGKILL) when it was stopped; a job that needed
	// SIGKILL sends its card through the gate with the site probe.
	KillRung string `json:"kill_rung,omitempty"`
	// IdleTimeout is the job's idle timeout in seconds (0: none).
	IdleTimeout int64 `json:"idle_timeout,omitempty"`
	// Attempt is the job's current (or last) attempt, from 1, of at most
	// Retries+1; Attempts says how each earlier one ended (a job runs
	// again only when its card ended an attempt: hung, or interrupted by
	// a reset).
	Attempt  int       `json:"attempt"`
	Retries  int       `json:"retries"`
	Attempts []Attempt `json:"attempts,omitempty"`
	// After and AfterMode: the jobs it was queued after, and which of
	// their endings let it run (QueueRequest.After); WaitsFor, while it is
	// queued, those that have not ended yet.
	After     []string `json:"after,omitempty"`
	AfterMode string   `json:"after_mode,omitempty"`
	WaitsFor  []string `json:"waits_for,omitempty"`
	// ArrayID and ArrayIndex: the array the job is an element of, and its
	// index there (QueueRequest.Array); empty on other jobs.
	ArrayID    string `json:"array_id,omitempty"`
	ArrayIndex *int   `json:"array_index,omitempty"`
	// PID is the process group of the current iteration while running.
	PID int `json:"pid,omitempty"`

	LogBytes        int64  `json:"log_bytes"`
	LogTruncated    bool   `json:"log_truncated"`
	DroppedLogBytes int64  `json:"dropped_log_bytes"`
	LogError        string `json:"log_error,omitempty"`
	// LogCutAt and LogCutBytes, once output passed TT_DEVICE_MAX_LOG_BYTES:
	// the first LogCutAt bytes and the last half of the limit are kept, and
	// LogCutBytes bytes between them were cut. GET /logs answers an offset
	// in the cut part with a marker and the tail's first offset as next.
	LogCutAt    int64 `json:"log_cut_at,omitempty"`
	LogCutBytes int64 `json:"log_cut_bytes,omitempty"`
	// OutputDeletedAt is set when the output file was deleted to keep all
	// jobs' output within TT_DEVICE_MAX_OUTPUT_BYTES (oldest finished jobs
	// first); LogBytes still says how much there was. GET /logs then
	// answers 410.
	OutputDeletedAt *time.Time `json:"output_deleted_at,omitempty"`

	// Held is set while the job's final record waits in memory for the
	// store to take writes again.
	Held bool `json:"held,omitempty"`

	PythonJob

	// Killed is set in POST /kill's answer: what was stopped, as the
	// Python tt-device-queue says it.
	Killed *Killed `json:"killed,omitempty"`
}

// MarshalJSON writes the record with "error" null when there is none, as
// the Python tt-device-queue writes it, rather than leaving the key out.
func (j Job) MarshalJSON() ([]byte, error) {
	type plain Job // without this method
	var e *string
	if j.Error != "" {
		e = &j.Error
	}
	return json.Marshal(struct {
		plain
		Error *string `json:"error"`
	}{plain(j), e})
}

// Done reports whether the job has ended.
func (j *Job) Done() bool { return j.State == "done" }

// ErrorResponse is the body of every 4xx and 5xx answer.
type ErrorResponse struct {
	Error string `json:"error"`
}

// LogsAnswer is GET /logs/<id>'s JSON answer, the Python
// tt-device-queue's shape, given unless the request asks for the raw bytes
// (Accept: application/octet-stream; see LogChunk). Content is the output
// with invalid UTF-8 replaced.
type LogsAnswer struct {
	JobID      string `json:"job_id"`
	Status     string `json:"status"`
	OutputFile string `json:"output_file"`
	Offset     int64  `json:"offset"`
	NextOffset int64  `json:"next_offset"`
	Content    string `json:"content"`
	// Truncated says more output follows this chunk; Complete that the job
	// is done and this chunk reaches the end of its output.
	Truncated bool `json:"truncated"`
	Complete  bool `json:"complete"`
	// LogSize is the offset just past the job's last byte.
	LogSize         int64 `json:"log_size"`
	LogTruncated    bool  `json:"log_truncated"`
	DroppedLogBytes int64 `json:"dropped_log_bytes"`
}

// RawOutput is the media type a GET /logs request asks for (Accept) to get
// the output bytes themselves, as the CLI and the status page do.
const RawOutput = "application/octet-stream"

// LogChunk is one answer of GET /logs/<id> in its raw form (see
// RawOutput). On the wire the body is the raw output bytes and the other
// fields travel in the X-Log-* headers, so output that is not UTF-8 passes
// unchanged.
type LogChunk struct {
	// Offset is where Data starts in the output file.
	Offset int64
	// NextOffset is the offset to ask for next.
	NextOffset int64
	// Size is the output file's size when the chunk was read.
	Size int64
	// State is the job's state; Done means no more output will come.
	State string
	Done  bool
	Data  []byte
}

// Header names of GET /logs answers.
const (
	HeaderLogOffset = "X-Log-Offset"
	HeaderLogNext   = "X-Log-Next-Offset"
	HeaderLogSize   = "X-Log-Size"
	HeaderJobState  = "X-Job-State"
	HeaderLogDone   = "X-Log-Done"
)

// HeaderBusyBound comes with a 503 given at one of queued's HTTP bounds
// (connections, handlers, streams): it names the setting that bounds what
// was busy, such as TT_DEVICE_HTTP_WORKERS_PER_USER. Nothing was done
// for the request, so it may be sent again, a little later (the client
// does, see BusyError); a 503 without it (a store that cannot be written,
// a stop) is not a matter of waiting a second.
const HeaderBusyBound = "X-Queued-Busy-Bound"
