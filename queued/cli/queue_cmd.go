package cli

import (
	"github.com/ttkit/ttkit/queued/api"
)

// QueueCmd submits a program and returns at once: the job id on stdout
// (the whole answer with --json), position and estimated wait on stderr.
type QueueCmd struct {
	Submission
	Array   string   `placeholder:"RANGE" help:"Queue one job per index (0-7, 1,3,5 or 0-15:4; at most 1000), all or none, each on --device's card(s) with TT_QUEUE_ARRAY_INDEX and TT_QUEUE_ARRAY_ID set; prints the array id, which wait, kill, result, list and logs take with --array."`
	Program []string `arg:"" passthrough:"partial" placeholder:"PROGRAM" help:"After --: a shell program as one quoted argument, such as -- 'python3 a.py | tee log', or a command as several words, each one argument, such as -- python3 a.py 'an arg'."`
}

// Run submits.
func (q *QueueCmd) Run(a *App) error {
	req, err := q.request(a, program(q.Program))
	if err != nil {
		return err
	}
	if q.Array != "" {
		if _, err := api.ParseArray(q.Array); err != nil {
			return usageErr("--array: %v", err)
		}
		req.Array = q.Array
	}
	sub, err := a.submit(req)
	if err != nil {
		return err
	}
	if q.Array != "" {
		return printArrayQueued(a, sub, q.Array)
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
