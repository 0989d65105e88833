package cli

import (
	"fmt"

	"github.com/ttkit/ttkit/queued/api"
)

// LogsCmd prints a job's output: a byte range of it, or (with --follow)
// everything from the offset on as it is produced, until the job ends.
// Of several jobs (more ids, or --array), each line is prefixed by its
// job (logs_many.go).
type LogsCmd struct {
	IDs    []string `arg:"" optional:"" placeholder:"JOB_ID" help:"Job id, or a unique prefix of at least 6 characters; several print each line prefixed by its job."`
	Array  string   `placeholder:"ARRAY_ID" help:"Every element of this array (queue --array printed its id), each line prefixed by its job and index."`
	ID     string   `kong:"-"`
	Offset int64    `placeholder:"BYTES" help:"Byte offset to start at."`
	Limit  int64    `placeholder:"BYTES" help:"Print at most this many bytes (default: all there is)."`
	Follow bool     `short:"f" help:"Keep printing output as it is produced until the job ends, then say how it ended and exit with its status."`
}

// logsJSON is one chunk as logs --json prints it (one line per chunk with
// --follow).
type logsJSON struct {
	JobID      string `json:"job_id"`
	Offset     int64  `json:"offset"`
	NextOffset int64  `json:"next_offset"`
	Size       int64  `json:"size"`
	State      string `json:"state"`
	Done       bool   `json:"done"`
	// Data is the output, invalid UTF-8 replaced.
	Data string `json:"data"`
	// Job is the finished job's record, on the last line of --follow.
	Job *api.Job `json:"job,omitempty"`
}

// Run prints the output.
func (l *LogsCmd) Run(a *App) error {
	if l.Offset < 0 || l.Limit < 0 {
		return usageErr("--offset and --limit: want 0 or more bytes")
	}
	if len(l.IDs) == 0 && l.Array == "" {
		return usageErr("name a job id, several, or --array ARRAY_ID")
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	if len(l.IDs) > 1 || l.Array != "" {
		var jobs []api.Job
		for _, id := range l.IDs {
			j, err := c.Job(a.ctx, id)
			if err != nil {
				return a.explain(a.ctx, err)
			}
			jobs = append(jobs, j)
		}
		if l.Array != "" {
			elems, err := arrayJobs(a, c, l.Array)
			if err != nil {
				return err
			}
			jobs = append(jobs, elems...)
		}
		return l.many(a, c, jobs)
	}
	l.ID = l.IDs[0]
	offset, left := l.Offset, l.Limit
	var all logsJSON
	first := true
	out, flush := a.Out, func() error { return nil }
	if !a.JSON && isTerminal(a.Out) {
		// Another user's output is escaped on a terminal (outputWriter).
		j, err := c.Job(a.ctx, l.ID)
		if err != nil {
			return a.explain(a.ctx, err)
		}
		out, flush = a.outputWriter(j)
	}
	defer flush()
	for {
		q := api.LogsQuery{Offset: offset, Limit: api.MaxLogChunk}
		if left > 0 {
			q.Limit = min(left, api.MaxLogChunk)
		}
		if l.Follow {
			q.Wait = api.MaxWait
		}
		ch, err := c.Logs(a.ctx, l.ID, q)
		if err != nil {
			if l.Follow && !first {
				return a.stoppedWaiting(a.ctx, l.ID, 0, err)
			}
			return a.explain(a.ctx, err)
		}
		first = false
		switch {
		case a.JSON && l.Follow:
			if len(ch.Data) > 0 || ch.Done {
				line := logsJSON{l.ID, ch.Offset, ch.NextOffset, ch.Size, ch.State, ch.Done, string(ch.Data), nil}
				if ch.Done {
					j, err := c.Job(a.ctx, l.ID)
					if err != nil {
						return a.explain(a.ctx, err)
					}
					line.Job = &j
				}
				if err := a.printJSON(line); err != nil {
					return err
				}
			}
		case a.JSON:
			if all.JobID == "" {
				all = logsJSON{JobID: l.ID, Offset: ch.Offset}
			}
			all.NextOffset, all.Size, all.State, all.Done = ch.NextOffset, ch.Size, ch.State, ch.Done
			all.Data += string(ch.Data)
		default:
			if _, err := out.Write(ch.Data); err != nil {
				return &Error{Code: ExitRefused, Err: fmt.Errorf("writing output: %w", err)}
			}
		}
		offset = ch.NextOffset
		if l.Limit > 0 {
			if left -= int64(len(ch.Data)); left <= 0 {
				break
			}
		}
		if ch.Done || (!l.Follow && (len(ch.Data) == 0 || offset >= ch.Size)) {
			break
		}
	}
	if err := flush(); err != nil {
		return &Error{Code: ExitRefused, Err: fmt.Errorf("writing output: %w", err)}
	}
	if a.JSON && !l.Follow {
		return a.printJSON(all)
	}
	if l.Follow && l.Limit == 0 {
		// Followed to the end: say how the job ended and exit with its
		// status, as run does.
		j, err := c.Job(a.ctx, l.ID)
		if err != nil {
			return a.explain(a.ctx, err)
		}
		if j.Done() && !a.JSON {
			if j.Outcome == "success" {
				a.progress.note("job %s %s", j.ID, describeEnd(j))
			}
			return a.finished(j)
		}
		if j.Done() {
			if code := jobStatus(*j.ExitCode); code != 0 {
				return &Error{Code: code}
			}
		}
	}
	return nil
}
