package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	"github.com/ttkit/ttkit/queued/api"
)

// HoldCmd takes cards in their FIFO turn and keeps them, running nothing,
// until released: for a Slurm job (see deploy/slurm), or for maintenance
// (a firmware flash, tt-topology). Jobs queued behind it wait; a reset
// of a held card waits for the release unless forced.
type HoldCmd struct {
	Device      string   `short:"d" required:"" placeholder:"N" help:"The card (or cards: 0,1 or 0-3) to hold."`
	Reason      string   `placeholder:"TEXT" help:"Why, for status: \"slurm job 4242\", \"firmware flash\"."`
	Expires     Duration `placeholder:"DURATION" help:"End the hold by itself this long from now, time spent queued included (seconds, or such as 2h); 0 (the default): never (on a shared queued, a non-admin's hold ends after TT_DEVICE_MAX_TIMEOUT)."`
	SlurmJob    string   `name:"slurm-job" placeholder:"ID" help:"The Slurm job the hold is for: queued ends it when that job is gone."`
	ForUID      uint32   `name:"for-uid" placeholder:"UID" help:"Admins on a shared queued: take the hold for this user (the Slurm Prolog: the job's SLURM_JOB_UID), who owns it and, under TT_DEVICE_ENFORCE=acl, alone may open its cards."`
	Wait        WaitFlag `placeholder:"[=DURATION]" help:"Wait until the hold is active: its cards held; --wait=5m at most that long (exit 124 then; the hold stays queued)."`
	WaitTimeout Duration `placeholder:"DURATION" help:"With --wait, stop waiting after this long and exit 124, as --wait=DURATION does."`
}

// Run queues the hold and prints its id.
func (h *HoldCmd) Run(a *App) error {
	if _, err := api.ParseDevices(h.Device); err != nil {
		return usageErr("--device: %v", err)
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	res, err := c.Hold(a.ctx, api.HoldRequest{DeviceID: strings.TrimSpace(h.Device), Reason: h.Reason,
		ExpiresSec: int64((time.Duration(h.Expires) + time.Second - 1) / time.Second), SlurmJobID: h.SlurmJob, ClientID: a.clientID(), ForUID: int64(h.ForUID)})
	if err != nil {
		return a.explain(a.ctx, err)
	}
	if h.Wait.Set && res.State != "active" {
		state, err := waitActive(a, c, res.HoldID, h.Wait.limit(h.WaitTimeout))
		res.State = state
		if err != nil {
			if a.JSON {
				a.printJSON(res)
			} else {
				a.println("%s", res.HoldID)
			}
			return err
		}
	}
	if a.JSON {
		return a.printJSON(res)
	}
	a.println("%s", res.HoldID)
	if res.State == "active" {
		a.progress.note("holding card%s %s; `%s release %s` lets go", plural(res.DeviceID), res.DeviceID, Name, res.HoldID[:8])
	} else {
		a.progress.note("hold of card%s %s queued at position %d; `%s hold-status --wait %s` waits until it holds", plural(res.DeviceID), res.DeviceID, res.Position, Name, res.HoldID[:8])
	}
	return nil
}

// plural is "s" for a list of several cards.
func plural(cards string) string {
	if strings.ContainsAny(cards, ",-") {
		return "s"
	}
	return ""
}

// waitActive polls hold id until it is active (nil), has ended (exit 1)
// or limit passes (exit 124; 0: no limit), and returns its last state.
func waitActive(a *App, c *api.Client, id string, limit time.Duration) (string, error) {
	ctx := a.ctx
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		j, err := c.JobBrief(ctx, id)
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return "queued", &Error{Code: ExitWaitTimeout, Err: fmt.Errorf("hold %s is still queued after %s", id, limit)}
		case err != nil:
			return "", a.explain(ctx, err)
		case j.State == "running":
			return "active", nil
		case j.State == "done":
			return "done", &Error{Code: ExitRefused, Err: fmt.Errorf("hold %s ended before it held its cards: %s %s", id, j.Outcome, j.Error)}
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// ReleaseCmd ends a hold, or every live hold taken for a Slurm job.
type ReleaseCmd struct {
	HoldID   string `arg:"" optional:"" name:"hold-id" placeholder:"HOLD_ID" help:"The hold: id, or a unique prefix of at least 6 characters."`
	SlurmJob string `name:"slurm-job" placeholder:"ID" help:"Release every live hold taken for this Slurm job (none is no error)."`
}

// Run releases and prints what it released.
func (r *ReleaseCmd) Run(a *App) error {
	switch {
	case r.HoldID != "" && r.SlurmJob != "":
		return usageErr("give HOLD_ID or --slurm-job, not both")
	case r.HoldID == "" && r.SlurmJob == "":
		return usageErr("give the hold to release (HOLD_ID) or --slurm-job ID")
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	res, err := c.Release(a.ctx, api.ReleaseRequest{HoldID: r.HoldID, SlurmJobID: r.SlurmJob})
	if err != nil {
		return a.explain(a.ctx, err)
	}
	if a.JSON {
		return a.printJSON(res)
	}
	if len(res.Released) == 0 {
		a.println("no live hold for Slurm job %s", termText(r.SlurmJob))
		return nil
	}
	for _, j := range res.Released {
		a.println("released hold %s of card%s %s", j.ID, plural(j.DeviceID), j.DeviceID)
	}
	return nil
}

// HoldStatusCmd shows a hold (or the holds of a Slurm job), and waits
// until it is active when asked: the Slurm TaskProlog's step.
type HoldStatusCmd struct {
	HoldID      string   `arg:"" optional:"" name:"hold-id" placeholder:"HOLD_ID" help:"The hold: id, or a unique prefix of at least 6 characters."`
	SlurmJob    string   `name:"slurm-job" placeholder:"ID" help:"The hold taken for this Slurm job."`
	Wait        WaitFlag `placeholder:"[=DURATION]" help:"Wait until it is active (exit 0) or has ended (exit 1); --wait=5m at most that long (exit 124 then)."`
	WaitTimeout Duration `placeholder:"DURATION" help:"With --wait, stop waiting after this long and exit 124, as --wait=DURATION does."`
}

// holdView is a hold as hold-status --json prints it.
type holdView struct {
	HoldID     string     `json:"hold_id"`
	DeviceID   string     `json:"device_id"`
	State      string     `json:"state"`
	Reason     string     `json:"reason,omitempty"`
	SlurmJobID string     `json:"slurm_job_id,omitempty"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	Outcome    string     `json:"outcome,omitempty"`
}

// Run prints the hold's state and cards.
func (h *HoldStatusCmd) Run(a *App) error {
	switch {
	case h.HoldID != "" && h.SlurmJob != "":
		return usageErr("give HOLD_ID or --slurm-job, not both")
	case h.HoldID == "" && h.SlurmJob == "":
		return usageErr("give the hold (HOLD_ID) or --slurm-job ID")
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	id := h.HoldID
	if h.SlurmJob != "" {
		if id, err = slurmHold(a, c, h.SlurmJob); err != nil {
			return err
		}
	}
	var waitErr error
	if h.Wait.Set {
		_, waitErr = waitActive(a, c, id, h.Wait.limit(h.WaitTimeout))
	}
	j, err := c.Job(a.ctx, id)
	if err != nil {
		return a.explain(a.ctx, err)
	}
	if j.Kind != "hold" {
		return &Error{Code: ExitRefused, Err: fmt.Errorf("%s is a %s, not a hold", j.ID, j.Kind)}
	}
	v := holdView{HoldID: j.ID, DeviceID: j.DeviceID, State: j.State, Reason: j.Reason, SlurmJobID: j.SlurmJobID, ExpiresAt: j.ExpiresAt, Outcome: j.Outcome}
	if v.State == "running" {
		v.State = "active"
	}
	if a.JSON {
		if err := a.printJSON(v); err != nil {
			return err
		}
	} else {
		a.println("hold %s of card%s %s: %s%s", v.HoldID, plural(v.DeviceID), v.DeviceID, v.State, holdDetail(v))
	}
	if waitErr != nil {
		return waitErr
	}
	if h.Wait.Set && v.State == "done" {
		return &Error{Code: ExitRefused}
	}
	return nil
}

// holdDetail is the rest of a hold's line: why, for which Slurm job.
func holdDetail(v holdView) string {
	var parts []string
	if v.Reason != "" {
		parts = append(parts, termText(v.Reason))
	}
	if v.SlurmJobID != "" && !strings.Contains(v.Reason, v.SlurmJobID) {
		parts = append(parts, "Slurm job "+termText(v.SlurmJobID))
	}
	if v.Outcome != "" {
		parts = append(parts, v.Outcome)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// slurmHold finds the hold taken for Slurm job id: the newest live one,
// else the newest that has ended, so that a TaskProlog waiting on a hold
// a forced reset or an Epilog already ended is told how it ended.
func slurmHold(a *App, c *api.Client, id string) (string, error) {
	list, err := c.List(a.ctx, api.ListQuery{Kind: "hold", SlurmJobID: id, Limit: 50})
	if err != nil {
		return "", a.explain(a.ctx, err)
	}
	for _, j := range list {
		if j.State != "done" {
			return j.ID, nil
		}
	}
	if len(list) > 0 {
		return list[0].ID, nil
	}
	return "", &Error{Code: ExitRefused, Err: fmt.Errorf("no hold for Slurm job %s", termText(id))}
}

// cardsText names a job's cards in a message: "card 1", or "cards 0,1"
// for a job (or hold) of several.
func cardsText(deviceID string) string {
	return "card" + plural(deviceID) + " " + deviceID
}

// WaitFlag is a --wait that may carry its bound: --wait waits without
// limit, --wait=5m at most five minutes (seconds or a duration, as
// --wait-timeout takes).
type WaitFlag struct {
	Set   bool
	Limit time.Duration
}

// IsBool lets --wait stand alone, as a switch.
func (w *WaitFlag) IsBool() bool { return true }

// Decode implements kong.MapperValue: a bare --wait, or --wait=DURATION.
func (w *WaitFlag) Decode(ctx *kong.DecodeContext) error {
	if ctx.Scan.Peek().Type != kong.FlagValueToken {
		*w = WaitFlag{Set: true} // a bare --wait
		return nil
	}
	var s string
	if err := ctx.Scan.PopValueInto("duration", &s); err != nil {
		return err
	}
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*w = WaitFlag{Set: true, Limit: v}
	return nil
}

// limit is the bound: --wait=DURATION's, else --wait-timeout's.
func (w WaitFlag) limit(timeout Duration) time.Duration {
	if w.Limit > 0 {
		return w.Limit
	}
	return time.Duration(timeout)
}
