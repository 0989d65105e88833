package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ttkit/ttkit/queued/api"
)

// KillCmd stops jobs: a queued one leaves its queue at once; a running
// one's process group gets SIGINT, SIGTERM after TT_DEVICE_KILL_GRACE and
// SIGKILL after TT_DEVICE_TERM_GRACE more. Without an id, --mine or --all it stops
// the caller's running job, as the Python tt-device-queue's kill without
// an id stops the running job.
type KillCmd struct {
	IDs    []string `arg:"" optional:"" placeholder:"JOB_ID" help:"Job ids, or unique prefixes of at least 6 characters. None: your running job (on --device's card, else on any card), when you have exactly one."`
	Device *int     `short:"d" placeholder:"N" help:"Only this card: your running job there, or with --mine or --all every queued or running job of yours, or of anyone's, there."`
	Mine   bool     `help:"Also every queued or running job of yours: on a system-mode queued those you submitted, else those under your client id."`
	All    bool     `help:"Also every queued or running job of anyone's (with --device: on that card) that you may stop, queued ones included."`
	Array  string   `placeholder:"ARRAY_ID" help:"Also every queued or running element of this array (queue --array printed its id)."`
}

// Run asks the daemon to stop each selected job, going on past refusals;
// it exits 1 when any was refused.
func (k *KillCmd) Run(a *App) error {
	if k.Device != nil && *k.Device < 0 {
		return usageErr("--device %d: want a card number", *k.Device)
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	for _, id := range k.IDs {
		if strings.TrimSpace(id) == "" {
			// The daemon takes an empty id as none, which stops your
			// running job: not what `kill "$ID"` with an unset ID means.
			return usageErr("an empty job id: name a job, or give no id at all to stop your running job")
		}
	}
	if len(k.IDs) == 0 && !k.Mine && !k.All && k.Array == "" {
		return k.running(a, c)
	}
	ids, err := k.selection(a, c)
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
			if !refusal(err) {
				return e
			}
			refused = append(refused, fmt.Sprintf("%s: %v", id, e.Err))
			continue
		}
		killed = append(killed, j)
		if !a.JSON {
			a.printKilled(j)
		}
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

// selection returns the ids given, then the active jobs --mine and --all
// add (see Selection.resolve), resets left out.
func (k *KillCmd) selection(a *App, c *api.Client) ([]string, error) {
	if k.Array != "" {
		if k.Mine || k.All || k.Device != nil {
			return nil, usageErr("--array stops an array's elements; give it without --device, --mine and --all")
		}
		jobs, err := arrayJobs(a, c, k.Array, "running", "queued")
		if err != nil {
			return nil, err
		}
		return append(append([]string(nil), k.IDs...), jobIDs(jobs)...), nil
	}
	if !k.Mine && !k.All {
		return k.IDs, nil
	}
	s := Selection{IDs: k.IDs, Device: k.Device, Mine: k.Mine && !k.All}
	if k.All && k.Device == nil {
		// Every card's: Selection adds jobs only for --device or --mine.
		return s.active(a, c, api.ListQuery{Limit: api.MaxListLimit})
	}
	return s.resolve(a, c)
}

// running stops the caller's running job, which the daemon picks (see
// api.Client.KillRunning): exactly one must be theirs, or the kill is
// refused naming what runs.
func (k *KillCmd) running(a *App, c *api.Client) error {
	card := ""
	if k.Device != nil {
		card = strconv.Itoa(*k.Device)
	}
	j, err := c.KillRunning(a.ctx, card, a.clientID())
	var none *api.NothingRunningError
	switch {
	case errors.As(err, &none):
		if a.JSON {
			if err := a.printJSON(api.NothingRunning{Error: api.NothingRunningMessage, Running: none.Running}); err != nil {
				return err
			}
		}
		return &Error{Code: ExitRefused, Err: errors.New(a.nothingRunning(c, card, none.Running))}
	case err != nil:
		return a.explain(a.ctx, err)
	}
	if a.JSON {
		return a.printJSON(j)
	}
	a.printKilled(j)
	return nil
}

// nothingRunning words a refused kill without an id: where the caller has
// no running job, what runs there instead and whose, and the caller's
// queued jobs, which kill stops when named.
func (a *App) nothingRunning(c *api.Client, card string, others []api.Job) string {
	where := "on any card"
	if card != "" {
		where = "on card " + card
	}
	var b strings.Builder
	fmt.Fprintf(&b, "no running job of yours %s, so nothing was killed", where)
	for _, j := range others {
		fmt.Fprintf(&b, "\n  card %s runs job %s of %s: %s", j.DeviceID, shortID(j.ID), ownerCell(j.Owner, j.OwnerUID, j.ClientID), cut(oneLine(j.Cmd), 60))
	}
	q := api.ListQuery{State: "queued", ClientID: a.clientID(), Mine: true, Limit: 10, DeviceID: card}
	if mine, err := c.List(a.ctx, q); err == nil {
		for _, j := range mine {
			fmt.Fprintf(&b, "\n  yours, queued on card %s: job %s: %s", j.DeviceID, shortID(j.ID), cut(oneLine(j.Cmd), 60))
		}
	}
	fmt.Fprintf(&b, "\nname the job to stop: %s kill JOB_ID (`%s list --mine` lists yours)", Name, Name)
	return b.String()
}

// printKilled says what a kill did to one job.
func (a *App) printKilled(j api.Job) {
	if j.Done() {
		a.println("killed job %s before it started (card %s)", j.ID, j.DeviceID)
		return
	}
	a.println("stopping job %s on %s: SIGINT sent to its process group, SIGTERM and SIGKILL follow after their graces", j.ID, cardsText(j.DeviceID))
	a.progress.note("`%s result %s` waits for it to end", Name, j.ID)
}

// refusal reports whether err is the daemon refusing a request, as
// opposed to a daemon that cannot be reached or is not queued.
func refusal(err error) bool {
	var ae *api.Error
	return errors.As(err, &ae) && !ae.NotQueued
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
