package api

import "time"

// Attempt is how one earlier attempt of a job ended, before the job ran
// again because its card ended it (see Job.Attempts).
type Attempt struct {
	Attempt    int        `json:"attempt"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	ExitCode   int        `json:"exit_code"`
	Outcome    string     `json:"outcome"`
	Error      string     `json:"error,omitempty"`
	KillRung   string     `json:"kill_rung,omitempty"`
}
