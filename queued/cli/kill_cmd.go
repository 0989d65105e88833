package cli

import (
	"errors"
	"fmt"

	"github.com/ttkit/ttkit/queued/api"
)

// KillCmd stops jobs: a queued one leaves its queue at once; a running
// one's process group gets SIGINT, then SIGKILL after the daemon's grace
// period (TT_DEVICE_KILL_GRACE).
type KillCmd struct {
	Selection
}

// Run asks the daemon to stop each selected job, going on past refusals;
// it exits 1 when any was refused.
func (k *KillCmd) Run(a *App) error {
	c, err := a.connect()
	if err != nil {
		return err
	}
	ids, err := k.resolve(a, c)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		a.progress.note("no queued or running job matches; nothing to kill")
		return nil
	}
	var killed []api.Job
	var refused []string
	for _, id := range ids {
		j, err := c.Kill(a.ctx, id)
		if err != nil {
			e := a.explain(a.ctx, err)
			if e.Code != ExitRefused {
				return e
			}
			refused = append(refused, fmt.Sprintf("%s: %v", id, e.Err))
			continue
		}
		killed = append(killed, j)
		if a.JSON {
			continue
		}
		if j.Done() {
			fmt.Fprintf(a.Out, "killed job %s before it started (card %s)\n", j.ID, j.DeviceID)
			continue
		}
		fmt.Fprintf(a.Out, "stopping job %s on card %s: SIGINT sent to its process group, SIGKILL follows after the grace period\n", j.ID, j.DeviceID)
		a.progress.note("`%s result %s` waits for it to end", Name, j.ID)
	}
	if a.JSON {
		if len(ids) == 1 && len(killed) == 1 {
			if err := a.printJSON(killed[0]); err != nil {
				return err
			}
		} else if err := a.printJSON(killed); err != nil {
			return err
		}
	}
	if len(refused) > 0 {
		msg := refused[0]
		if len(refused) > 1 {
			msg = fmt.Sprintf("%d of %d kills were refused:\n  %s", len(refused), len(ids), joinLines(refused))
		}
		return &Error{Code: ExitRefused, Err: errors.New(msg)}
	}
	return nil
}

// joinLines joins messages one per indented line.
func joinLines(msgs []string) string {
	out := ""
	for i, m := range msgs {
		if i > 0 {
			out += "\n  "
		}
		out += m
	}
	return out
}
