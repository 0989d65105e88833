package cli

import (
	"fmt"

	"github.com/ttkit/ttkit/queued/api"
)

// LogsCmd prints a job's output: a byte range of it, or (with --follow)
// everything from the offset on as it is produced, until the job ends.
type LogsCmd struct {
	ID     string `arg:"" placeholder:"JOB_ID" help:"Job id, or a unique prefix of at least 6 characters."`
	Offset int64  `placeholder:"BYTES" help:"Byte offset to start at."`
	Limit  int64  `placeholder:"BYTES" help:"Print at most this many bytes (default: all there is)."`
	Follow bool   `short:"f" help:"Keep printing output as it is produced until the job ends."`
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
}

// Run prints the output.
func (l *LogsCmd) Run(a *App) error {
	if l.Offset < 0 || l.Limit < 0 {
		return usageErr("--offset and --limit: want 0 or more bytes")
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	offset, left := l.Offset, l.Limit
	var all logsJSON
	first := true
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
				if err := a.printJSON(logsJSON{l.ID, ch.Offset, ch.NextOffset, ch.Size, ch.State, ch.Done, string(ch.Data)}); err != nil {
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
			if _, err := a.Out.Write(ch.Data); err != nil {
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
	if a.JSON && !l.Follow {
		return a.printJSON(all)
	}
	return nil
}
