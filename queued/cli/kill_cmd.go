package cli

import "fmt"

// KillCmd stops a job: a queued one leaves its queue at once; a running
// one's process group gets SIGINT, then SIGKILL after the daemon's grace
// period (TT_DEVICE_KILL_GRACE).
type KillCmd struct {
	ID string `arg:"" placeholder:"JOB_ID" help:"Job id, or a unique prefix of at least 6 characters."`
}

// Run asks the daemon to stop the job.
func (k *KillCmd) Run(a *App) error {
	c, err := a.connect()
	if err != nil {
		return err
	}
	j, err := c.Kill(a.ctx, k.ID)
	if err != nil {
		return a.explain(a.ctx, err)
	}
	if a.JSON {
		return a.printJSON(j)
	}
	if j.Done() {
		fmt.Fprintf(a.Out, "killed job %s before it started (card %s)\n", j.ID, j.DeviceID)
		return nil
	}
	fmt.Fprintf(a.Out, "stopping job %s on card %s: SIGINT sent to its process group, SIGKILL follows after the grace period\n", j.ID, j.DeviceID)
	a.progress.note("`%s result %s` waits for it to end", Name, j.ID)
	return nil
}
