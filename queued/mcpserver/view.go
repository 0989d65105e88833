package mcpserver

import (
	"fmt"
	"strings"
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

// JobView is a job as the tools answer it: the fields an agent acts on,
// not the whole record (tt-device-queue job --json has that).
type JobView struct {
	JobID   string `json:"job_id" jsonschema:"The job's id; tt_job, tt_wait, tt_logs and tt_kill take it."`
	Kind    string `json:"kind" jsonschema:"job, reset or hold."`
	Device  string `json:"device" jsonschema:"The job's card, or cards (\"0,1\")."`
	State   string `json:"state" jsonschema:"queued, running or done."`
	Outcome string `json:"outcome,omitempty" jsonschema:"When done: success, failure, timeout, hung, killed, interrupted, dependency or card_dead."`
	// Attempt and Retries say which run of a job with retries this is.
	Attempt int `json:"attempt,omitempty" jsonschema:"Which attempt this is (or was, when done), from 1; a job runs again, up to retries times, when its card ended it."`
	Retries int `json:"retries,omitempty" jsonschema:"How many times the job may run again after its card ended it."`
	// ExitCode is set when done: a signal N is -N.
	ExitCode         *int    `json:"exit_code,omitempty" jsonschema:"When done, the exit status; a signal N is -N."`
	Error            string  `json:"error,omitempty" jsonschema:"Why the job failed to run, when it did."`
	Command          string  `json:"command" jsonschema:"The job's shell program (in a list, its first 256 bytes)."`
	Cwd              string  `json:"cwd,omitempty" jsonschema:"The directory it runs in."`
	Agent            string  `json:"agent,omitempty" jsonschema:"The AI agent that queued it, from its MCP client's name; empty for a person's job."`
	Owner            string  `json:"owner,omitempty" jsonschema:"On a shared (system-mode) queued, the user it runs as."`
	ClientID         string  `json:"client_id,omitempty" jsonschema:"The client id it was submitted under."`
	Position         int     `json:"position,omitempty" jsonschema:"While queued, its place in the card's queue: 1 starts next."`
	EstimatedWaitSec float64 `json:"estimated_wait_sec,omitempty" jsonschema:"While queued, the expected wait; while running, the expected remaining run time."`
	SubmittedAt      string  `json:"submitted_at,omitempty" jsonschema:"RFC 3339."`
	StartedAt        string  `json:"started_at,omitempty" jsonschema:"RFC 3339, once started."`
	FinishedAt       string  `json:"finished_at,omitempty" jsonschema:"RFC 3339, once done."`
	Iterations       int     `json:"iterations,omitempty" jsonschema:"Iterations run (repeat)."`
	OutputBytes      int64   `json:"output_bytes" jsonschema:"How much output the job has written."`
}

// viewOf is j as the tools answer it.
func viewOf(j api.Job) JobView {
	v := JobView{JobID: j.ID, Kind: j.Kind, Device: j.DeviceID, State: j.State, Outcome: j.Outcome, ExitCode: j.ExitCode,
		Error: j.Error, Command: j.Cmd, Cwd: j.Cwd, Agent: j.Agent, Owner: j.Owner, ClientID: j.ClientID, Position: j.Position,
		EstimatedWaitSec: j.EstimatedWaitSec, SubmittedAt: stamp(&j.SubmittedAt), StartedAt: stamp(j.StartedAt),
		FinishedAt: stamp(j.FinishedAt), Iterations: j.Iterations, OutputBytes: j.LogBytes, Attempt: j.Attempt, Retries: j.Retries}
	if j.State == "running" {
		v.EstimatedWaitSec = j.EstimatedRemainingSec
	}
	return v
}

func stamp(t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// describe is one line about j for the text summary.
func describe(j api.Job) string {
	s := fmt.Sprintf("job %s on card %s", j.ID, j.DeviceID)
	if j.Agent != "" {
		s += " (agent: " + j.Agent + ")"
	}
	switch j.State {
	case "queued":
		return s + fmt.Sprintf(": queued at position %d, estimated wait %s", j.Position, seconds(j.EstimatedWaitSec))
	case "running":
		return s + fmt.Sprintf(": running, %d bytes of output so far", j.LogBytes)
	}
	s += ": " + j.Outcome
	if j.ExitCode != nil {
		s += fmt.Sprintf(", exit status %d", *j.ExitCode)
	}
	if j.Error != "" {
		s += ": " + oneLine(j.Error)
	}
	return s
}

func seconds(sec float64) string {
	return time.Duration(sec * float64(time.Second)).Round(time.Second).String()
}

// oneLine joins s's lines, so a field someone else chose cannot forge
// lines of the summary.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
