package api

// The Python tt-device-queue's views of a job and of GET /status, carried
// beside ttkit's own so that scripts written against that tool keep
// working (docs/switching.md).

// PythonJob is the Python tt-device-queue's view of a job record, its
// keys beside ttkit's in every record the API answers, so scripts written
// against that tool keep working (docs/switching.md lists what still
// differs, such as its times' format). The daemon fills it; most keys
// repeat a ttkit one under the Python tool's name.
type PythonJob struct {
	// JobID is ID; Status is State; Mode is "run" for a job and "reset"
	// for a reset.
	JobID  string `json:"job_id"`
	Status string `json:"status"`
	Mode   string `json:"mode"`
	// OutputFile is the job's output file on the daemon's host (on a
	// system-mode daemon only root may read it; GET /logs serves it).
	OutputFile string `json:"output_file"`
	// Elapsed is the seconds from start to end, once done (0 for a job
	// that never started); null before.
	Elapsed *float64 `json:"elapsed"`
	// TimedOut is set when the job ended by its timeout; TimeoutMessage
	// then says so in the Python tool's words.
	TimedOut       bool   `json:"timed_out"`
	TimeoutMessage string `json:"timeout_message,omitempty"`
	// LogSize is LogBytes.
	LogSize int64 `json:"log_size"`
	// RepeatCurrent is the iteration running or last run (1-based);
	// RepeatCompleted counts the iterations that succeeded.
	RepeatCurrent   int `json:"repeat_current"`
	RepeatCompleted int `json:"repeat_completed"`
	// FirstIterationElapsed is always null: ttkit learns run times per
	// command and card instead (see PerIterEstimateSec).
	FirstIterationElapsed *float64 `json:"first_iteration_elapsed"`
	// PerIterEstimateSec is the expected run time of one iteration while
	// queued or running, and the mean iteration's once done.
	PerIterEstimateSec float64 `json:"per_iter_estimate_sec"`
	// RunningSec is how long a running job has run; absent otherwise.
	RunningSec *float64 `json:"running_sec,omitempty"`
}

// PythonStatus is the Python tt-device-queue's GET /status, which knows
// one card: here the default card (card 0, where a submission without
// device_id goes; the first card when there is no card 0), so scripts
// written against that tool keep working. Cards has every card.
type PythonStatus struct {
	// Current is the card's running job, null when idle.
	Current *PyCurrent `json:"current"`
	// Pending is the card's queue in order.
	Pending []PyPending `json:"pending"`
	// Recent is the card's last (at most 10) finished jobs, oldest first.
	Recent []PyRecent `json:"recent"`
	Device *PyDevice  `json:"device"`
	Worker *PyWorker  `json:"worker"`
}

// PyCurrent is the default card's running job in PythonStatus.
type PyCurrent struct {
	ID     string `json:"id"`
	Cmd    string `json:"cmd"` // cut to 120 bytes
	Client string `json:"client"`
	// RunningSec is how long it has run; EstimatedRemainingSec how long it
	// is expected to run still.
	RunningSec            float64 `json:"running_sec"`
	EstimatedRemainingSec float64 `json:"estimated_remaining_sec"`
	Repeat                int     `json:"repeat"`
	Mode                  string  `json:"mode"` // run, or reset for a reset
	RepeatCurrent         int     `json:"repeat_current"`
	RepeatCompleted       int     `json:"repeat_completed"`
}

// PyPending is one queued job of the default card in PythonStatus.
type PyPending struct {
	ID     string `json:"id"`
	Cmd    string `json:"cmd"` // cut to 120 bytes
	Client string `json:"client"`
	// WaitingSec is how long it has waited so far.
	WaitingSec       float64 `json:"waiting_sec"`
	EstimatedWaitSec float64 `json:"estimated_wait_sec"`
	EstimatedRunSec  float64 `json:"estimated_run_sec"`
	Repeat           int     `json:"repeat"`
	Mode             string  `json:"mode"`
}

// PyRecent is one finished job of the default card in PythonStatus.
type PyRecent struct {
	ID       string   `json:"id"`
	Cmd      string   `json:"cmd"` // cut to 120 bytes
	ExitCode *int     `json:"exit_code"`
	Elapsed  *float64 `json:"elapsed"`
	// Finished is the end in the daemon's local time, as the Python tool
	// writes it: "2006-01-02 15:04:05".
	Finished           string  `json:"finished"`
	OutputFile         string  `json:"output_file"`
	Repeat             int     `json:"repeat"`
	Mode               string  `json:"mode"`
	Client             string  `json:"client"`
	RepeatCompleted    int     `json:"repeat_completed"`
	PerIterEstimateSec float64 `json:"per_iter_estimate_sec"`
	TimedOut           bool    `json:"timed_out"`
	LogTruncated       bool    `json:"log_truncated"`
}

// PyDevice is the default card's state in PythonStatus. Times are in the
// daemon's local time, "2006-01-02 15:04:05", as the Python tool writes
// them; null when not set.
type PyDevice struct {
	DeviceID string `json:"device_id"`
	// State is healthy, resetting or dead.
	State string `json:"state"`
	// ResetEpoch counts the card's completed resets; ResetPending says a
	// reset is queued or running.
	ResetEpoch   uint64  `json:"reset_epoch"`
	ResetPending bool    `json:"reset_pending"`
	LastResetAt  *string `json:"last_reset_at"`
	DeadSince    *string `json:"dead_since"`
	DeadReason   *string `json:"dead_reason"`
	// QueueDisabled says nothing starts on any card now: the store cannot
	// be written, or the service is stopping; DisabledReason says which.
	QueueDisabled  bool    `json:"queue_disabled"`
	DisabledReason *string `json:"disabled_reason"`
}

// PyWorker is the health of the default card's worker in PythonStatus.
type PyWorker struct {
	// Alive is false once the service is stopping.
	Alive bool `json:"alive"`
	// HeartbeatAgeSec is 0: each card's worker answers for itself in
	// Cards[].Worker instead of a heartbeat.
	HeartbeatAgeSec float64 `json:"heartbeat_age_sec"`
	// DegradedReason says why the card does not start jobs (the store
	// failing, a foreign holder, a dead card); null when it does.
	DegradedReason *string `json:"degraded_reason"`
	// MaintenanceWarning is a retention or output-budget warning.
	MaintenanceWarning *string `json:"maintenance_warning"`
}
