package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ttkit/ttkit/queued/api"
)

// Arrays (queue --array): one job per index, sharing an array id that
// wait, kill, result, list and logs take with --array.

// checkArrayID refuses what cannot be an array id or its prefix, before
// anything is asked.
func checkArrayID(id string) error {
	id = strings.TrimSpace(id)
	if len(id) < api.MinIDPrefix || strings.Trim(id, "0123456789abcdef") != "" {
		return usageErr("--array %q: want an array id (queue --array printed it), or a prefix of at least %d of its hex digits", id, api.MinIDPrefix)
	}
	return nil
}

// arrayJobs lists the elements of array id, in index order, of the given
// states (all when none); a usage error when the array has no element at
// all, so a mistyped id does not read as an empty array.
func arrayJobs(a *App, c *api.Client, id string, states ...string) ([]api.Job, error) {
	if err := checkArrayID(id); err != nil {
		return nil, err
	}
	id = strings.TrimSpace(id)
	jobs, err := c.List(a.ctx, api.ListQuery{ArrayID: id, Limit: api.MaxListLimit})
	if err != nil {
		return nil, a.explain(a.ctx, err)
	}
	if len(jobs) == 0 {
		return nil, &Error{Code: ExitRefused, Err: fmt.Errorf("no array %s: no job of one is known (its records may have been pruned)", id)}
	}
	var out []api.Job
	for _, j := range jobs {
		if len(states) == 0 || slices.Contains(states, j.State) {
			out = append(out, j)
		}
	}
	slices.SortFunc(out, func(x, y api.Job) int { return arrayIndex(x) - arrayIndex(y) })
	return out, nil
}

// arrayIndex is a job's index in its array, 0 for a job of none.
func arrayIndex(j api.Job) int {
	if j.ArrayIndex == nil {
		return 0
	}
	return *j.ArrayIndex
}

// jobIDs is the ids of jobs.
func jobIDs(jobs []api.Job) []string {
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

// printArrayQueued prints an array's answer: its id on stdout (every
// element's id with --json), how many elements where on stderr.
func printArrayQueued(a *App, sub api.QueueResponse, spec string) error {
	if a.JSON {
		return a.printJSON(sub)
	}
	a.println("%s", sub.ArrayID)
	a.progress.note("queued array %s: %d jobs (indices %s) on %s; the first at position %d (estimated wait %s)",
		shortID(sub.ArrayID), len(sub.JobIDs), strings.TrimSpace(spec), cardsText(sub.DeviceID), sub.Position, fmtWait(sub.EstimatedWaitSec))
	return nil
}
