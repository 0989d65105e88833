package cli

import (
	"strconv"

	"github.com/ttkit/ttkit/queued/api"
)

// Selection names jobs the way wait and kill take them: ids (or unique
// prefixes), plus every queued or running job of a card, or of yours.
type Selection struct {
	IDs    []string `arg:"" optional:"" placeholder:"JOB_ID" help:"Job ids, or unique prefixes of at least 6 characters."`
	Device *int     `short:"d" placeholder:"N" help:"Also every queued or running job on this card."`
	Mine   bool     `help:"Also every queued or running job of yours (with --device: yours on that card): on a system-mode queued those you submitted, else those under your client id."`
	Array  string   `placeholder:"ARRAY_ID" help:"Also every element of this array (queue --array printed its id), in index order."`
}

// resolve returns the selected job ids, in the order given, then the
// active jobs found by --device and --mine; resets are left out of the
// latter. It is a usage error to select nothing.
func (s *Selection) resolve(a *App, c *api.Client) ([]string, error) {
	if s.Array != "" {
		if s.Device != nil || s.Mine {
			return nil, usageErr("--array selects an array's elements; give it without --device and --mine")
		}
		jobs, err := arrayJobs(a, c, s.Array)
		if err != nil {
			return nil, err
		}
		return append(append([]string(nil), s.IDs...), jobIDs(jobs)...), nil
	}
	if s.Device == nil && !s.Mine {
		if len(s.IDs) == 0 {
			return nil, usageErr("name at least one job id, or --device N or --mine")
		}
		return s.IDs, nil
	}
	q := api.ListQuery{Limit: api.MaxListLimit}
	if s.Device != nil {
		if *s.Device < 0 {
			return nil, usageErr("--device %d: want a card number", *s.Device)
		}
		q.DeviceID = strconv.Itoa(*s.Device)
	}
	if s.Mine {
		q.ClientID, q.Mine = a.clientID(), true
	}
	return s.active(a, c, q)
}

// active returns s.IDs, then the queued or running jobs q selects (the
// running ones first), resets left out.
func (s *Selection) active(a *App, c *api.Client, q api.ListQuery) ([]string, error) {
	ids := append([]string(nil), s.IDs...)
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
	}
	for _, state := range []string{"running", "queued"} {
		q.State = state
		jobs, err := c.List(a.ctx, q)
		if err != nil {
			return nil, a.explain(a.ctx, err)
		}
		for _, j := range jobs {
			if j.Kind != "reset" && !seen[j.ID] {
				seen[j.ID] = true
				ids = append(ids, j.ID)
			}
		}
	}
	return ids, nil
}
