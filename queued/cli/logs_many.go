package cli

import (
	"bytes"
	"fmt"
	"strconv"
	"sync"

	"github.com/ttkit/ttkit/queued/api"
)

// logs of several jobs at once (logs -f ID ID, logs -f --array ID): each
// job's output is read on its own, and every line is printed whole with
// its job's prefix, so lines of different jobs never mix within a line.

// linePrefix is how a line of j reads: "[1a2b3c4d] ", or for an element
// of an array "[1a2b3c4d #3] ".
func linePrefix(j api.Job) string {
	if j.ArrayID != "" {
		return "[" + shortID(j.ID) + " #" + strconv.Itoa(arrayIndex(j)) + "] "
	}
	return "[" + shortID(j.ID) + "] "
}

// many prints the output of jobs, each line prefixed by its job, until
// each has ended (--follow) or all there is was printed; then, followed
// to the end, it says how each ended and exits with the worst status.
func (l *LogsCmd) many(a *App, c *api.Client, jobs []api.Job) error {
	if l.Offset != 0 || l.Limit != 0 {
		return usageErr("--offset and --limit read one job's output; give one job id with them")
	}
	var mu sync.Mutex // one line (or JSON chunk) at a time on stdout
	ends := make([]api.Job, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ends[i], errs[i] = l.stream(a, c, j, &mu)
		}()
	}
	wg.Wait()
	worst := 0
	for i, j := range ends {
		if errs[i] != nil {
			return errs[i]
		}
		if !l.Follow || !j.Done() || j.ExitCode == nil {
			continue
		}
		if !a.JSON {
			a.progress.note("job %s %s", j.ID, termText(describeEnd(j)))
		}
		worst = max(worst, jobStatus(*j.ExitCode))
	}
	if worst != 0 {
		return &Error{Code: worst}
	}
	return nil
}

// stream prints one job's output for many and returns its record once
// done (or, without --follow, once all there is was printed).
func (l *LogsCmd) stream(a *App, c *api.Client, j api.Job, mu *sync.Mutex) (api.Job, error) {
	prefix := linePrefix(j)
	escape := isTerminal(a.Out) && othersOutput(j)
	var offset int64
	var partial []byte
	write := func(line []byte) error {
		text := string(line)
		if escape {
			text = termText(text)
		}
		_, err := fmt.Fprintf(a.Out, "%s%s\n", prefix, text)
		return err
	}
	for {
		q := api.LogsQuery{Offset: offset, Limit: api.MaxLogChunk}
		if l.Follow {
			q.Wait = api.MaxWait
		}
		ch, err := c.Logs(a.ctx, j.ID, q)
		if err != nil {
			if l.Follow && offset > 0 {
				return j, a.stoppedWaiting(a.ctx, j.ID, 0, err)
			}
			return j, a.explain(a.ctx, err)
		}
		last := ch.Done || (!l.Follow && (len(ch.Data) == 0 || ch.NextOffset >= ch.Size))
		mu.Lock()
		if a.JSON {
			if len(ch.Data) > 0 || ch.Done {
				err = a.printJSON(logsJSON{j.ID, ch.Offset, ch.NextOffset, ch.Size, ch.State, ch.Done, string(ch.Data), nil})
			}
		} else {
			partial = append(partial, ch.Data...)
			for err == nil {
				i := bytes.IndexByte(partial, '\n')
				if i < 0 {
					break
				}
				err = write(partial[:i])
				partial = partial[i+1:]
			}
			if err == nil && last && len(partial) > 0 {
				err = write(partial) // the job's last line, without its newline
				partial = nil
			}
		}
		mu.Unlock()
		if err != nil {
			return j, &Error{Code: ExitRefused, Err: fmt.Errorf("writing output: %w", err)}
		}
		offset = ch.NextOffset
		if last {
			break
		}
	}
	done, err := c.Job(a.ctx, j.ID)
	if err != nil {
		return j, a.explain(a.ctx, err)
	}
	return done, nil
}
