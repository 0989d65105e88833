package cli

import (
	"bufio"
	"errors"
	"fmt"
	"strings"

	"github.com/ttkit/ttkit/queued/api"
)

// ResetCmd schedules card resets and returns at once: of one card
// (--device), of the card a job ran on (JOB_ID; skipped when that card has
// been reset since), or of every card (neither). A reset holds its card's
// queue and can interrupt the card's running job; duplicates coalesce.
type ResetCmd struct {
	Device      string `short:"d" placeholder:"N" help:"Reset only this card (or these cards: 0,1 or 0-3)."`
	Force       bool   `help:"Do not wait for a hold on the card, nor for another user's process holding it (admins): the reset ends the hold and runs under the process, and its log says who forced it."`
	NoInterrupt bool   `help:"Let the card's running job finish first instead of stopping it."`
	Yes         bool   `short:"y" help:"Reset every card without asking, even on a terminal."`
	JobID       string `arg:"" optional:"" name:"job-id" placeholder:"JOB_ID" help:"Reset the card this job ran on, unless it has been reset since."`
}

// Run asks for the resets and prints what each card will do.
func (r *ResetCmd) Run(a *App) error {
	req := api.ResetRequest{NoInterrupt: r.NoInterrupt, Force: r.Force}
	switch {
	case r.Device != "" && r.JobID != "":
		return usageErr("give --device or JOB_ID, not both")
	case r.Device != "":
		if _, err := api.ParseDevices(r.Device); err != nil {
			return usageErr("--device: %v", err)
		}
		req.DeviceID = strings.TrimSpace(r.Device)
	default:
		req.JobID = r.JobID
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	if req.DeviceID == "" && req.JobID == "" && !r.Yes && isTerminal(a.In) && isTerminal(a.Err) {
		if err := r.confirm(a, c); err != nil {
			return err
		}
	}
	res, err := c.Reset(a.ctx, req)
	if err != nil {
		return a.explain(a.ctx, err)
	}
	if a.JSON {
		return a.printJSON(res)
	}
	for _, e := range res.Resets {
		a.println("%s", describeReset(e))
	}
	a.progress.note("resets run in the background: `%s status` shows them; `%s logs RESET_ID` shows what a reset ran", Name, Name)
	return nil
}

// describeReset says what a reset request did on one card.
func describeReset(e api.ResetEntry) string {
	card := "card " + e.DeviceID + ": "
	switch {
	case e.Skipped:
		return card + "no reset: " + e.Reason
	case e.Coalesced:
		return fmt.Sprintf("%sa reset is already %s: %s (this request joined it)", card, e.State, e.ResetJobID)
	}
	s := fmt.Sprintf("%sreset %s %s", card, e.ResetJobID, e.State)
	switch {
	case e.InterruptedJobID != "" && e.OnHold:
		s += "; it ends hold " + e.InterruptedJobID + " (forced)"
	case e.InterruptedJobID != "":
		s += "; it interrupts running job " + e.InterruptedJobID
	case e.WaitsForJobID != "" && e.OnHold:
		s += fmt.Sprintf(" behind hold %s, until it is released (an admin's reset --force does not wait)", e.WaitsForJobID)
	case e.WaitsForJobID != "":
		owner := e.WaitsForOwner
		if owner == "" {
			owner = "another user"
		}
		s += fmt.Sprintf(" behind job %s of %s (only its owner or an admin may interrupt it)", e.WaitsForJobID, owner)
	}
	return s
}

// resetQuestion lays out, before a reset of every card, the cards and
// what happens to their running jobs. On a shared (system-mode) daemon it
// names each job's owner, and a non-admin's reset waits for other users'
// jobs rather than interrupting them.
func resetQuestion(st api.Status, noInterrupt bool) string {
	cards := make([]string, len(st.Cards))
	var interrupted, waited []string
	shared := modeOf(st).System()
	for i, cs := range st.Cards {
		cards[i] = cs.DeviceID
		j := cs.Current
		if j == nil || j.Kind == "reset" {
			continue
		}
		of := ""
		if shared {
			of = " of " + ownerCell(j.Owner, j.OwnerUID, j.ClientID)
		}
		line := fmt.Sprintf("  card %s: job %s%s  %s", cs.DeviceID, shortID(j.ID), of, cut(termText(oneLine(j.Cmd)), 60))
		if c := st.Caller; shared && c != nil && !c.Admin && j.OwnerUID != nil && *j.OwnerUID != c.UID {
			waited = append(waited, line)
		} else {
			interrupted = append(interrupted, line)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "This resets every card (%s).\n", strings.Join(cards, ", "))
	switch {
	case len(interrupted)+len(waited) == 0:
		b.WriteString("No job is running.\n")
	case noInterrupt:
		fmt.Fprintf(&b, "These running jobs finish first (--no-interrupt):\n%s\n", strings.Join(append(interrupted, waited...), "\n"))
	default:
		if len(interrupted) > 0 {
			fmt.Fprintf(&b, "It interrupts these running jobs:\n%s\n", strings.Join(interrupted, "\n"))
		}
		if len(waited) > 0 {
			fmt.Fprintf(&b, "These running jobs of other users finish first (only their owner or an admin may interrupt them):\n%s\n", strings.Join(waited, "\n"))
		}
	}
	return b.String()
}

// errNotConfirmed is a bare reset the person at the terminal declined.
var errNotConfirmed = errors.New("reset cancelled; nothing was reset")

// confirm shows, before a reset of every card, the running jobs it would
// interrupt and asks to go on; anything but y or yes declines.
func (r *ResetCmd) confirm(a *App, c *api.Client) error {
	st, err := c.Status(a.ctx)
	if err != nil {
		return a.explain(a.ctx, err)
	}
	fmt.Fprint(a.Err, termLines(resetQuestion(st, r.NoInterrupt)))
	fmt.Fprint(a.Err, "Reset every card? [y/N] ")
	line, _ := bufio.NewReader(a.In).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return &Error{Code: ExitRefused, Err: errNotConfirmed}
}
