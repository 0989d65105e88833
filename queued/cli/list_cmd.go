package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

// ListCmd lists jobs: the active ones first, card by card, then finished
// ones, newest first.
type ListCmd struct {
	Device *int   `short:"d" placeholder:"N" help:"Only this card's jobs."`
	State  string `enum:",queued,running,done" default:"" placeholder:"STATE" help:"Only jobs in this state: queued, running or done."`
	Mine   bool   `help:"Only your jobs: on a system-mode queued those you submitted, else those under your client id (--client-id, by default your user name)."`
	Limit  int    `default:"50" placeholder:"N" help:"At most this many jobs (1 to 1000)."`
	Array  string `placeholder:"ARRAY_ID" help:"Only the elements of this array (queue --array printed its id)."`
}

// Run prints the jobs.
func (l *ListCmd) Run(a *App) error {
	if l.Limit < 1 || l.Limit > api.MaxListLimit {
		return usageErr("--limit %d: want 1 to %d", l.Limit, api.MaxListLimit)
	}
	q := api.ListQuery{State: l.State, Limit: l.Limit, ArrayID: strings.TrimSpace(l.Array)}
	if l.Array != "" {
		if err := checkArrayID(l.Array); err != nil {
			return err
		}
	}
	if l.Device != nil {
		if *l.Device < 0 {
			return usageErr("--device %d: want a card number", *l.Device)
		}
		q.DeviceID = strconv.Itoa(*l.Device)
	}
	if l.Mine {
		q.ClientID, q.Mine = a.clientID(), true
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	jobs, err := c.List(a.ctx, q)
	if err != nil {
		return a.explain(a.ctx, err)
	}
	if a.JSON {
		if jobs == nil {
			jobs = []api.Job{}
		}
		return a.printJSON(jobs)
	}
	writeList(a.Out, jobs, time.Now(), a.colour())
	return nil
}

// listCmdWidth bounds the COMMAND column.
const listCmdWidth = 48

// writeList renders jobs as a table.
func writeList(w io.Writer, jobs []api.Job, now time.Time, colour bool) {
	if len(jobs) == 0 {
		fmt.Fprintln(w, "no jobs")
		return
	}
	header := []string{"ID", "CARD", "STATE", "POS", "OWNER", "SUBMITTED", "RUNTIME/OUTCOME", "COMMAND"}
	rows := make([][]cell, 0, len(jobs))
	for _, j := range jobs {
		pos := "-"
		if j.Position > 0 {
			pos = itoa(j.Position)
		}
		owner := withAgent(ownerCell(j.Owner, j.OwnerUID, j.ClientID), j.Agent)
		what := j.Cmd
		if j.Kind == "reset" {
			what = "(reset)"
		}
		rows = append(rows, []cell{
			{text: shortID(j.ID)}, {text: j.DeviceID}, {j.State, jobStateColour(j)}, {text: pos}, {text: owner},
			{text: fmtDuration(now.Sub(j.SubmittedAt)) + " ago"}, {text: runtimeOrOutcome(j, now)},
			{text: cut(termText(oneLine(what)), listCmdWidth)},
		})
	}
	writeTable(w, header, rows, colour)
}

// runtimeOrOutcome is how long a running job has run, or how a finished
// one ended.
func runtimeOrOutcome(j api.Job, now time.Time) string {
	switch {
	case j.State == "running" && j.StartedAt != nil:
		return fmtDuration(now.Sub(*j.StartedAt))
	case j.State == "queued" && len(j.WaitsFor) > 0:
		return "after " + shortIDs(j.WaitsFor)
	case j.State != "done":
		return "-"
	}
	out := j.Outcome
	if j.ExitCode != nil {
		out += " (" + strconv.Itoa(*j.ExitCode) + ")"
	}
	if j.StartedAt != nil && j.FinishedAt != nil {
		out += " in " + fmtDuration(j.FinishedAt.Sub(*j.StartedAt))
	}
	return out
}

// jobStateColour colours a job's state by how it ended.
func jobStateColour(j api.Job) string {
	switch {
	case j.State == "running":
		return green
	case j.State == "done" && j.Outcome != "success":
		return red
	}
	return ""
}
