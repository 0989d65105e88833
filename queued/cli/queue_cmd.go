package cli

import (
	"fmt"

	"github.com/ttkit/ttkit/queued/api"
)

// QueueCmd submits a program and returns at once: the job id on stdout
// (the whole answer with --json), position and estimated wait on stderr.
type QueueCmd struct {
	Submission
	Program string `arg:"" placeholder:"PROGRAM" help:"The shell program, as one quoted argument after --, such as -- 'python3 script.py'."`
}

// Run submits.
func (q *QueueCmd) Run(a *App) error {
	req, err := q.request(a, q.Program)
	if err != nil {
		return err
	}
	sub, err := a.submit(req)
	if err != nil {
		return err
	}
	return a.printQueued(sub)
}

// printQueued prints a submission's answer.
func (a *App) printQueued(sub api.QueueResponse) error {
	if a.JSON {
		return a.printJSON(sub)
	}
	fmt.Fprintln(a.Out, sub.JobID)
	a.progress.note("queued on card %s at position %d (estimated wait %s)", sub.DeviceID, sub.Position, fmtWait(sub.EstimatedWaitSec))
	return nil
}
