package store

import "time"

// Attempt is how one earlier attempt of a job ended, kept in the job's
// record when the job was run again after it (see Job.Retries): a job
// retried after a hang shows each hang, not only its last run.
type Attempt struct {
	Attempt    int       `json:"attempt"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	ExitCode   int       `json:"exit_code"`
	Outcome    Outcome   `json:"outcome"`
	Error      string    `json:"error,omitempty"`
	KillRung   string    `json:"kill_rung,omitempty"`
}

// AttemptNo is the job's current attempt, from 1: a record written before
// retries were reads as its first.
func (j *Job) AttemptNo() int { return max(j.Attempt, 1) }
