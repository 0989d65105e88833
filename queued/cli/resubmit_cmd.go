package cli

import (
	"fmt"
	"strconv"

	"github.com/ttkit/ttkit/queued/api"
)

// ResubmitCmd queues a new job with a finished (or any) job's program,
// working directory, environment, timeout and repeat: the natural step
// after a reset interrupted a job. The daemon makes the copy (POST
// /resubmit), and it belongs to the job's owner: an admin's resubmit of a
// user's job runs as that user, never with the admin's identity and the
// user's environment.
type ResubmitCmd struct {
	ID     string `arg:"" placeholder:"JOB_ID" help:"The job to submit again: id, or a unique prefix of at least 6 characters."`
	Device *int   `short:"d" placeholder:"N" help:"Queue it on this card instead of the one it ran on."`
}

// Run submits the copy and prints its id, as queue does.
func (r *ResubmitCmd) Run(a *App) error {
	req := api.ResubmitRequest{JobID: r.ID, ClientID: a.clientID()}
	if r.Device != nil {
		if *r.Device < 0 {
			return usageErr("--device %d: want a card number", *r.Device)
		}
		req.DeviceID = strconv.Itoa(*r.Device)
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	sub, err := c.Resubmit(a.ctx, req)
	if err != nil {
		e := a.explain(a.ctx, err)
		if e.Code == ExitInterrupted {
			e.Err = fmt.Errorf("interrupted while resubmitting: the copy may have been queued; `%s status` shows the queues", Name)
		}
		return e
	}
	if !a.JSON {
		owner := ""
		if sub.Owner != "" {
			owner = ", as " + sub.Owner
		}
		a.progress.note("resubmitted %s as a new job%s", sub.ResubmittedFrom, owner)
	}
	return a.printQueued(sub)
}
