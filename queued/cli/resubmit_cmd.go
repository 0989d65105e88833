package cli

import (
	"strconv"

	"github.com/ttkit/ttkit/queued/api"
)

// ResubmitCmd queues a new job with a finished (or any) job's program,
// working directory, environment, timeout and repeat: the natural step
// after a reset interrupted a job.
type ResubmitCmd struct {
	ID     string `arg:"" placeholder:"JOB_ID" help:"The job to submit again: id, or a unique prefix of at least 6 characters."`
	Device *int   `short:"d" placeholder:"N" help:"Queue it on this card instead of the one it ran on."`
}

// Run submits the copy and prints its id, as queue does.
func (r *ResubmitCmd) Run(a *App) error {
	c, err := a.connect()
	if err != nil {
		return err
	}
	old, err := c.Job(a.ctx, r.ID)
	if err != nil {
		return a.explain(a.ctx, err)
	}
	if old.Kind == "reset" {
		return usageErr("%s is a reset, not a job; `%s reset --device %s` schedules another", old.ID, Name, old.DeviceID)
	}
	req := api.QueueRequest{Cmd: old.Cmd, Cwd: old.Cwd, DeviceID: old.DeviceID, Env: old.Env, EnvFromShell: old.EnvFromShell,
		Timeout: old.Timeout, Repeat: old.Repeat, ClientID: a.clientID()}
	if r.Device != nil {
		if *r.Device < 0 {
			return usageErr("--device %d: want a card number", *r.Device)
		}
		req.DeviceID = strconv.Itoa(*r.Device)
	}
	sub, err := a.submit(req)
	if err != nil {
		return err
	}
	if !a.JSON {
		a.progress.note("resubmitted %s as a new job", old.ID)
	}
	return a.printQueued(sub)
}
