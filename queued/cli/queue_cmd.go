package cli

import (
	"github.com/ttkit/ttkit/queued/api"
)

// QueueCmd submits a program and returns at once: the job id on stdout
// (the whole answer with --json), position and estimated wait on stderr.
type QueueCmd struct {
	Submission
	Program []string `arg:"" passthrough:"partial" placeholder:"PROGRAM" help:"After --: a shell program as one quoted argument, such as -- 'python3 a.py | tee log', or a command as several words, each one argument, such as -- python3 a.py 'an arg'."`
}

// Run submits.
func (q *QueueCmd) Run(a *App) error {
	req, err := q.request(a, program(q.Program))
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
	a.println("%s", sub.JobID)
	a.progress.note("queued on %s at position %d (estimated wait %s)", cardsText(sub.DeviceID), sub.Position, fmtWait(sub.EstimatedWaitSec))
	return nil
}
