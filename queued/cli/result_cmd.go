package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

// ResultCmd waits for a job to end, prints the end of its output and exits
// with the job's status.
type ResultCmd struct {
	ID          string   `arg:"" optional:"" placeholder:"JOB_ID" help:"Job id, or a unique prefix of at least 6 characters."`
	Array       string   `placeholder:"ARRAY_ID" help:"Instead of one job, every element of this array in index order, each output under a line naming it; exits with the worst status."`
	NoWait      bool     `help:"Answer at once; exit 124 if the job has not ended."`
	WaitTimeout Duration `placeholder:"DURATION" help:"Stop waiting after this long (seconds, or such as 10m) and exit 124; the job goes on. 0 (the default) waits without limit."`
	MaxBytes    int64    `name:"max-bytes" aliases:"output-limit" env:"TT_DEVICE_RESULT_BYTES" default:"${result_bytes}" placeholder:"BYTES" help:"Print at most this many bytes of output, the last ones (--output-limit, the Python tt-device-queue's name, is the same)."`
}

// resultJSON is what result --json prints: the job's record with its keys
// at the top, as the Python tt-device-queue prints a result, and again as
// "job"; output, the printed part of the output (invalid UTF-8 replaced)
// from byte output_offset; output_cut, set when earlier bytes were left
// out; and the Python tool's output_truncated, set when the output printed
// is not all the job wrote (cut here, or past TT_DEVICE_MAX_LOG_BYTES).
func resultJSON(job api.Job, output string, offset int64) (map[string]any, error) {
	b, err := json.Marshal(job)
	if err != nil {
		return nil, fmt.Errorf("encoding the job's record: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("encoding the job's record: %w", err)
	}
	m["job"] = job
	m["output"] = output
	m["output_offset"] = offset
	m["output_cut"] = offset > 0
	m["output_truncated"] = offset > 0 || job.LogTruncated || job.LogCutBytes > 0
	return m, nil
}

// printResult prints result --json.
func (a *App) printResult(job api.Job, output string, offset int64) error {
	m, err := resultJSON(job, output, offset)
	if err != nil {
		return &Error{Code: ExitRefused, Err: err}
	}
	return a.printJSON(m)
}

// Run waits and prints.
func (r *ResultCmd) Run(a *App) error {
	if r.MaxBytes < 1 {
		return usageErr("--max-bytes %d (TT_DEVICE_RESULT_BYTES): want 1 or more", r.MaxBytes)
	}
	switch {
	case r.Array != "" && r.ID != "":
		return usageErr("give a job id or --array, not both")
	case r.Array == "" && r.ID == "":
		return usageErr("name a job id, or --array ARRAY_ID")
	case r.Array != "" && a.JSON:
		return usageErr("result --array prints outputs; for the records use list --array ID --json")
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	if r.Array != "" {
		return r.array(a, c)
	}
	return r.one(a, c)
}

// array prints each element's result in index order, each under a line
// naming it, and exits with the worst status.
func (r *ResultCmd) array(a *App, c *api.Client) error {
	jobs, err := arrayJobs(a, c, r.Array)
	if err != nil {
		return err
	}
	worst := 0
	for _, j := range jobs {
		a.println("==> array %s element %d: job %s <==", shortID(j.ArrayID), arrayIndex(j), j.ID)
		one := *r
		one.ID, one.Array = j.ID, ""
		err := one.one(a, c)
		var e *Error
		switch {
		case errors.As(err, &e) && e.Err == nil:
			worst = max(worst, e.Code)
		case err != nil:
			return err
		}
	}
	if worst != 0 {
		return &Error{Code: worst}
	}
	return nil
}

// one waits for job r.ID and prints its output.
func (r *ResultCmd) one(a *App, c *api.Client) error {
	var err error
	limit := time.Duration(r.WaitTimeout)
	ctx, cancel := a.waitContext(limit)
	defer cancel()
	var job api.Job
	if r.NoWait {
		job, err = c.Result(ctx, r.ID, 0)
	} else {
		job, err = c.WaitResult(ctx, r.ID)
	}
	if err != nil {
		return a.stoppedWaiting(ctx, r.ID, limit, err)
	}
	if !job.Done() {
		if a.JSON {
			if err := a.printResult(job, "", 0); err != nil {
				return err
			}
		}
		return &Error{Code: ExitWaitTimeout, Err: fmt.Errorf("job %s has not ended: it is %s.\n  wait for it: %s result %s\n  stop it:     %s kill %s",
			job.ID, a.jobWhereabouts(job.ID), Name, job.ID, Name, job.ID)}
	}
	from := max(0, job.LogBytes-r.MaxBytes)
	if job.OutputDeletedAt != nil {
		return a.deletedResult(job)
	}
	if a.JSON {
		var buf bytes.Buffer
		if err := a.copyOutput(a.ctx, job.ID, from, &buf); errors.Is(err, errOutputDeleted) {
			return a.deletedResult(job)
		} else if err != nil {
			return err
		}
		if err := a.printResult(job, buf.String(), from); err != nil {
			return err
		}
		if code := jobStatus(*job.ExitCode); code != 0 {
			return &Error{Code: code}
		}
		return nil
	}
	out, flush := a.outputWriter(job)
	err = a.copyOutput(a.ctx, job.ID, from, out)
	if ferr := flush(); err == nil && ferr != nil {
		err = &Error{Code: ExitRefused, Err: fmt.Errorf("writing output: %w", ferr)}
	}
	if errors.Is(err, errOutputDeleted) {
		return a.deletedResult(job)
	} else if err != nil {
		return err
	}
	switch {
	case from > 0 && job.LogCutBytes > 0:
		a.progress.note("printed the end of the output (TT_DEVICE_RESULT_BYTES); of its %d bytes the first %d and the last %d were kept (TT_DEVICE_MAX_LOG_BYTES), and `%s logs %s` prints those",
			job.LogBytes, job.LogCutAt, job.LogBytes-job.LogCutAt-job.LogCutBytes, Name, job.ID)
	case from > 0:
		a.progress.note("output cut: printed the last %d of %d bytes (TT_DEVICE_RESULT_BYTES); `%s logs %s` prints all of it",
			job.LogBytes-from, job.LogBytes, Name, job.ID)
	}
	return a.finished(job)
}

// errOutputDeleted is copyOutput's error for output deleted to keep all
// output within TT_DEVICE_MAX_OUTPUT_BYTES (410 Gone).
var errOutputDeleted = errors.New("output deleted")

// deletedResult ends result for a job whose output was deleted: no output,
// a note saying why, and the job's own exit status.
func (a *App) deletedResult(job api.Job) error {
	if a.JSON {
		if err := a.printResult(job, "", 0); err != nil {
			return err
		}
		if code := jobStatus(*job.ExitCode); code != 0 {
			return &Error{Code: code}
		}
		return nil
	}
	a.progress.note("job %s: its output was deleted to keep all jobs' output within TT_DEVICE_MAX_OUTPUT_BYTES (oldest finished jobs first); `%s job %s` shows its record",
		job.ID, Name, job.ID)
	return a.finished(job)
}

// copyOutput copies a finished job's output from offset to its end.
func (a *App) copyOutput(ctx context.Context, id string, offset int64, w io.Writer) error {
	for {
		ch, err := a.client.Logs(ctx, id, api.LogsQuery{Offset: offset, Limit: api.MaxLogChunk})
		if api.IsStatus(err, http.StatusGone) {
			return errOutputDeleted
		}
		if err != nil {
			return a.explain(ctx, err)
		}
		if _, err := w.Write(ch.Data); err != nil {
			return &Error{Code: ExitRefused, Err: fmt.Errorf("writing output: %w", err)}
		}
		offset = ch.NextOffset
		if ch.Done || len(ch.Data) == 0 {
			return nil
		}
	}
}
