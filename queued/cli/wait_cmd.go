package cli

import (
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

// WaitCmd waits until every selected job has ended and exits with the
// worst status among them.
type WaitCmd struct {
	Selection
	WaitTimeout Duration `placeholder:"DURATION" help:"Stop waiting after this long (seconds, or such as 10m) and exit 124; the jobs go on. 0 (the default) waits without limit."`
}

// Run waits for each job in turn (the total is the longest wait) and
// prints one line per job as it is found ended.
func (w *WaitCmd) Run(a *App) error {
	c, err := a.connect()
	if err != nil {
		return err
	}
	ids, err := w.resolve(a, c)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		a.progress.note("no queued or running job matches; nothing to wait for")
		return nil
	}
	limit := time.Duration(w.WaitTimeout)
	ctx, cancel := a.waitContext(limit)
	defer cancel()
	worst := 0
	var jobs []api.Job
	for _, id := range ids {
		j, err := c.WaitResult(ctx, id)
		if err != nil {
			return a.stoppedWaiting(ctx, id, limit, err)
		}
		jobs = append(jobs, j)
		code := jobStatus(*j.ExitCode)
		worst = max(worst, code)
		if !a.JSON {
			a.println("%s card %s: %s", j.ID, j.DeviceID, termText(describeEnd(j)))
		}
	}
	if a.JSON {
		if err := a.printJSON(jobs); err != nil {
			return err
		}
	}
	if worst != 0 {
		return &Error{Code: worst}
	}
	return nil
}
