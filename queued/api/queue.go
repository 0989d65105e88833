package api

// POST /queue and POST /resubmit: a new job, or an array of them, and
// the answer.

// QueueRequest is the body of POST /queue.
type QueueRequest struct {
	// Cmd is one shell program, run by bash -c (sh -c without bash).
	Cmd string `json:"cmd"`
	// Cwd is the absolute directory it runs in; it must exist. Omitted,
	// as the Python tt-device-queue allows, it is the daemon's working
	// directory on a user-mode daemon (the Python server's jobs run
	// there) and the submitter's home directory on a system-mode one.
	// The CLI always sends it.
	Cwd string `json:"cwd,omitempty"`
	// DeviceID is the card's queue, "0" when empty, or the cards of a job
	// that needs several at once: "0,1" or "0-3" (see ParseDevices), which
	// starts when it is at the head of every one of their queues. The
	// server also accepts a JSON integer.
	DeviceID string `json:"device_id,omitempty"`
	// Env adds NAME=VALUE pairs to the service environment, at most
	// MaxEnvBytes in all. The CLI puts the submitter's toolchain variables
	// here (PATH, VIRTUAL_ENV, TT_METAL_*, ...) besides those given with
	// --env.
	Env map[string]string `json:"env,omitempty"`
	// EnvFromShell names the entries of Env that the CLI took from the
	// submitter's shell rather than from --env, so job can tell them
	// apart; each must be a key of Env, listed once.
	EnvFromShell []string `json:"env_from_shell,omitempty"`
	// Timeout bounds the whole job, every iteration together, in seconds;
	// 0 selects the default.
	Timeout int64 `json:"timeout,omitempty"`
	// Repeat runs the program that many times, stopping at the first
	// failure; 0 means 1.
	Repeat int `json:"repeat,omitempty"`
	// IdleTimeout, in seconds, ends the job as hung (outcome "hung",
	// exit code -124) when it writes no output for that long; 0 or
	// omitted selects the daemon's default (TT_DEVICE_IDLE_TIMEOUT, off
	// unless set). At most the largest timeout (TT_DEVICE_MAX_TIMEOUT).
	IdleTimeout int64 `json:"idle_timeout,omitempty"`
	// Retries is how many times the job runs again, at the head of its
	// card's queue once the card is fit, when it ends because of its
	// card (hung, interrupted by a reset, or failed on a card the gate
	// then finds unfit); never when it fails by its own exit status on a
	// fit card. 0 to MaxRetries.
	Retries int `json:"retries,omitempty"`
	// ClientID is diagnostic only; it never affects order.
	ClientID string `json:"client_id,omitempty"`
	// Agent names the AI agent that queued the job through
	// tt-device-queue mcp (the MCP client's name from its handshake, such
	// as claude-code), so people see which jobs an agent queued; empty for
	// a person's job. At most MaxAgentBytes, no control characters. Like
	// ClientID it is what the client says, never an identity, and never
	// affects order.
	Agent string `json:"agent,omitempty"`
	// After lists jobs (ids or unique prefixes, at most MaxAfter, each
	// one the caller may see) this one waits for: it keeps its place in
	// its card's FIFO order without blocking the jobs behind it, and
	// starts at its turn once each has ended as AfterMode accepts.
	After []string `json:"after,omitempty"`
	// AfterMode is "ok" (the default: each must succeed, as Slurm's
	// afterok), "notok" (each must end otherwise) or "any". A job whose
	// dependency can no longer be met ends with outcome "dependency"
	// without running.
	AfterMode string `json:"after_mode,omitempty"`
	// Array queues one job per index ("0-7", "1,3,5", "0-15:4"; see
	// ParseArray), all or none, each an ordinary job on DeviceID's
	// card(s) that sees its index in TT_QUEUE_ARRAY_INDEX and the array's
	// id in TT_QUEUE_ARRAY_ID. The answer's JobID is the first element's.
	Array string `json:"array,omitempty"`
	// Mode is accepted for the Python tt-device-queue's clients, which
	// send "run"; it is the only mode.
	Mode string `json:"mode,omitempty"`
}

// QueueResponse answers POST /queue.
type QueueResponse struct {
	JobID    string `json:"job_id"`
	DeviceID string `json:"device_id"`
	State    string `json:"state"`
	// Position is 1 for the next job to start on the card.
	Position         int     `json:"position"`
	EstimatedWaitSec float64 `json:"estimated_wait_sec"`
	// EstimatedRunSec is how long the whole job (every repeat) is
	// expected to run, learned from the card's history.
	EstimatedRunSec float64 `json:"estimated_run_sec"`
	// EstimateKnown says EstimatedRunSec comes from this command's own
	// earlier runs on the card.
	EstimateKnown bool `json:"estimate_known,omitempty"`
	// ResubmittedFrom, in the answer to POST /resubmit, is the job copied.
	ResubmittedFrom string `json:"resubmitted_from,omitempty"`
	// Owner is the user the new job runs as on a system-mode daemon: the
	// submitter, or for a resubmit the copied job's owner.
	Owner string `json:"owner,omitempty"`

	// The Python tt-device-queue's keys of this answer, so scripts
	// written against it keep working: the job's output file on the
	// daemon's host, its repeat and timeout (the default applied) and
	// its mode, always "run".
	OutputFile string `json:"output_file"`
	Repeat     int    `json:"repeat"`
	Timeout    int64  `json:"timeout"`
	Mode       string `json:"mode"`

	// ArrayID and JobIDs, in the answer to an array (QueueRequest.Array):
	// the id its elements share and each element's id, in index order.
	ArrayID string   `json:"array_id,omitempty"`
	JobIDs  []string `json:"job_ids,omitempty"`
}

// ResubmitRequest is the body of POST /resubmit: a copy of JobID's job
// (program, working directory, environment, timeout, repeat) is queued on
// its card, or DeviceID's. The copy belongs to the job's owner, whoever
// asks, so an admin's resubmit runs as that user.
type ResubmitRequest struct {
	JobID    string `json:"job_id"`
	DeviceID string `json:"device_id,omitempty"`
	ClientID string `json:"client_id,omitempty"`
}
