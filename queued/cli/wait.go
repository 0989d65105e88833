package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	"github.com/ttkit/ttkit/queued/api"
)

// How often a waiting command refreshes the queue position: every second
// for the live line on a terminal, less often for plain lines. The daemon
// has no long-poll for a job's start, so this is a slow poll while the job
// is queued; output, and the job's end, arrive by long-poll at once.
const (
	liveRefresh  = time.Second
	plainRefresh = 2 * time.Second
)

// progress shows a queued job's position on stderr: one line redrawn in
// place on a terminal, otherwise a plain line whenever the position
// changes.
type progress struct {
	w     io.Writer
	live  bool
	drawn bool   // a live line is on the screen
	last  string // what the last plain line said
}

// show draws msg; key decides, for plain lines, whether it is news.
func (p *progress) show(key, msg string) {
	msg = termText(msg)
	if p.live {
		fmt.Fprintf(p.w, "\r\x1b[K%s", msg)
		p.drawn = true
		return
	}
	if key != p.last {
		fmt.Fprintln(p.w, msg)
		p.last = key
	}
}

// clear removes the live line, if any, before other output.
func (p *progress) clear() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}

// note prints a line of its own, its control characters escaped but its
// newlines (termLines): its arguments may be what someone else chose.
func (p *progress) note(format string, args ...any) {
	p.clear()
	fmt.Fprintln(p.w, Name+": "+termLines(fmt.Sprintf(format, args...)))
}

// waitContext bounds a local wait by limit (--wait-timeout); 0 means no
// bound. Its cause tells a timed-out wait from an interrupted one.
func (a *App) waitContext(limit time.Duration) (context.Context, context.CancelFunc) {
	if limit <= 0 {
		return a.ctx, func() {}
	}
	return context.WithTimeoutCause(a.ctx, limit, errWaitTimeout)
}

// await follows a submitted job to its end: the position while queued,
// the output as produced, then the job's own exit status. limit > 0 bounds
// the local wait; the job is never stopped by it.
func (a *App) await(sub api.QueueResponse, limit time.Duration, outputLimit int64) error {
	ctx, cancel := a.waitContext(limit)
	defer cancel()
	a.progress.note("job %s queued on %s at position %d (estimated wait %s)",
		sub.JobID, cardsText(sub.DeviceID), sub.Position, fmtWait(sub.EstimatedWaitSec))
	a.progress.last = strconv.Itoa(sub.Position)
	if a.JSON {
		if err := a.printJSON(runEvent{Event: "queued", JobID: sub.JobID, DeviceID: sub.DeviceID, Position: sub.Position,
			EstimatedWaitSec: sub.EstimatedWaitSec}); err != nil {
			return err
		}
	}
	job, cut, err := a.follow(ctx, sub, outputLimit)
	if err != nil {
		return a.stoppedWaiting(ctx, sub.JobID, limit, err)
	}
	if cut {
		a.progress.note("output cut: printed the first %d bytes (--output-limit); `%s logs %s` prints all of it", outputLimit, Name, job.ID)
	}
	if a.JSON {
		if err := a.printJSON(runEvent{Event: "done", JobID: job.ID, DeviceID: job.DeviceID, Job: &job}); err != nil {
			return err
		}
	}
	return a.finished(job)
}

// runEvent is one line of run --json: queued, started, output (Offset and
// Data, invalid UTF-8 replaced) and done (with the job's record).
type runEvent struct {
	Event            string   `json:"event"`
	JobID            string   `json:"job_id"`
	DeviceID         string   `json:"device_id,omitempty"`
	Position         int      `json:"position,omitempty"`
	EstimatedWaitSec float64  `json:"estimated_wait_sec,omitempty"`
	Offset           int64    `json:"offset,omitempty"`
	Data             string   `json:"data,omitempty"`
	Job              *api.Job `json:"job,omitempty"`
}

// follow copies the job's output to stdout until the job is done, only
// its first outputLimit bytes when that is above 0 (cut then says some
// were left out).
func (a *App) follow(ctx context.Context, sub api.QueueResponse, outputLimit int64) (api.Job, bool, error) {
	c := a.client
	cut := false
	refresh := plainRefresh
	if a.progress.live {
		refresh = liveRefresh
	}
	queued, since := sub.State == "queued", time.Now()
	announced := false // the started event of --json
	var offset int64
	for {
		q := api.LogsQuery{Offset: offset, Limit: api.MaxLogChunk, Wait: api.MaxWait}
		if queued {
			q.Wait = refresh
		}
		ch, err := c.Logs(ctx, sub.JobID, q)
		if err != nil {
			return api.Job{}, false, err
		}
		if queued && ch.State == "queued" {
			j, err := c.JobBrief(ctx, sub.JobID)
			if err != nil {
				return api.Job{}, false, err
			}
			if j.State == "queued" {
				a.progress.show(strconv.Itoa(j.Position), fmt.Sprintf("%s: job %s waiting for card %s: position %d, estimated wait %s (waited %s)",
					Name, shortID(j.ID), j.DeviceID, j.Position, fmtWait(j.EstimatedWaitSec), fmtDuration(time.Since(since))))
				continue
			}
		}
		if queued {
			queued = false
			if a.progress.live {
				a.progress.clear()
			} else if ch.State != "done" {
				a.progress.note("job %s started on %s", sub.JobID, cardsText(sub.DeviceID))
			}
		}
		if a.JSON && !announced && ch.State != "queued" {
			announced = true
			if err := a.printJSON(runEvent{Event: "started", JobID: sub.JobID, DeviceID: sub.DeviceID}); err != nil {
				return api.Job{}, false, err
			}
		}
		data := ch.Data
		if outputLimit > 0 && ch.Offset+int64(len(data)) > outputLimit {
			data, cut = data[:max(outputLimit-ch.Offset, 0)], true
		}
		switch {
		case len(data) > 0 && a.JSON:
			if err := a.printJSON(runEvent{Event: "output", JobID: sub.JobID, Offset: ch.Offset, Data: string(data)}); err != nil {
				return api.Job{}, false, err
			}
		case len(data) > 0:
			if _, err := a.Out.Write(data); err != nil {
				return api.Job{}, false, &Error{Code: ExitRefused, Err: fmt.Errorf("writing output: %w", err)}
			}
		}
		offset = ch.NextOffset
		if ch.Done || cut {
			// Once cut, nothing more is printed: only the end is awaited.
			job, err := c.WaitResult(ctx, sub.JobID)
			return job, cut, err
		}
	}
}

// stoppedWaiting words an ended local wait: how to follow or stop the
// job that goes on.
func (a *App) stoppedWaiting(ctx context.Context, id string, limit time.Duration, err error) error {
	var own *Error
	if errors.As(err, &own) {
		return own
	}
	e := a.explain(ctx, err)
	var why string
	switch e.Code {
	case ExitWaitTimeout:
		why = "stopped waiting after " + fmtDuration(limit)
	case ExitInterrupted:
		why = "interrupted"
	default:
		return e
	}
	e.Err = fmt.Errorf("%s; job %s was not stopped and is still %s.\n"+
		"  follow it:  %s logs --follow %s\n  its result: %s result %s\n  stop it:    %s kill %s",
		why, id, a.jobWhereabouts(id), Name, id, Name, id, Name, id)
	return e
}

// jobWhereabouts says briefly where a job is, asking the daemon with a
// context of its own since the command's may have ended.
func (a *App) jobWhereabouts(id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	j, err := a.client.JobBrief(ctx, id)
	switch {
	case err != nil:
		return "queued or running"
	case j.State == "queued":
		return fmt.Sprintf("queued on %s (position %d)", cardsText(j.DeviceID), j.Position)
	case j.State == "running":
		return "running on card " + j.DeviceID
	default:
		return fmt.Sprintf("%s (it has just ended: %s)", j.State, j.Outcome)
	}
}

// finished reports how a job ended and gives its exit status.
func (a *App) finished(j api.Job) error {
	if j.ExitCode == nil {
		return &Error{Code: ExitRefused, Err: fmt.Errorf("job %s is %s and has no exit code yet", j.ID, j.State)}
	}
	if j.Outcome != "success" {
		a.progress.note("job %s %s", j.ID, describeEnd(j))
	}
	if code := jobStatus(*j.ExitCode); code != 0 {
		return &Error{Code: code}
	}
	return nil
}

// describeEnd says how a done job ended, for people.
func describeEnd(j api.Job) string {
	var b strings.Builder
	switch j.Outcome {
	case "success":
		b.WriteString("succeeded")
	case "failure":
		b.WriteString("failed")
	case "timeout":
		fmt.Fprintf(&b, "timed out after %ds", j.Timeout)
	case "killed":
		b.WriteString("was killed")
	case "interrupted":
		b.WriteString("was interrupted")
	case "card_dead":
		b.WriteString("failed because its card is dead")
	case "hung":
		b.WriteString("hung")
	case "dependency":
		b.WriteString("never ran: its dependency was not met")
	default:
		b.WriteString("ended (" + j.Outcome + ")")
	}
	if j.Retries > 0 || j.Attempt > 1 {
		// Which of its attempts this was (docs/job-endings.md).
		fmt.Fprintf(&b, " on attempt %d/%d", max(j.Attempt, 1), j.Retries+1)
	}
	if j.ExitCode != nil {
		fmt.Fprintf(&b, ": exit code %d", *j.ExitCode)
		if s := jobStatus(*j.ExitCode); s != *j.ExitCode {
			fmt.Fprintf(&b, " (status %d)", s)
		}
	}
	// A timeout's or a kill's error repeats the outcome; the others say
	// something new (the signal, what interrupted it).
	if j.Error != "" && j.Outcome != "timeout" && j.Outcome != "killed" {
		b.WriteString(": " + j.Error)
	}
	return b.String()
}

// Duration is a wait limit: seconds ("90", "1.5") or a Go duration
// ("10m", "1h30m").
type Duration time.Duration

// Decode implements kong.MapperValue.
func (d *Duration) Decode(ctx *kong.DecodeContext) error {
	var s string
	if err := ctx.Scan.PopValueInto("duration", &s); err != nil {
		return err
	}
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

func parseDuration(s string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f < 0 || f > 1e9 || f != f {
			return 0, fmt.Errorf("%q: want seconds, 0 or more", s)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q: want seconds (90) or a duration (10m, 1h30m)", s)
	}
	return v, nil
}

// shortID is the start of a job id, enough to tell jobs apart on a line
// and accepted back as a prefix.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// fmtEstimate rounds an estimate to what it can mean: 5 s steps under a
// minute, whole minutes under an hour, 10 minutes beyond, with a "~".
func fmtEstimate(d time.Duration) string {
	switch {
	case d < 2500*time.Millisecond:
		return "a few seconds"
	case d < time.Minute:
		return "~" + fmtDuration(d.Round(5*time.Second))
	case d < time.Hour:
		return fmt.Sprintf("~%dm", int(d.Round(time.Minute)/time.Minute))
	default:
		d = d.Round(10 * time.Minute)
		return fmt.Sprintf("~%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
}

// fmtWait words an estimated wait: "none" when the card is free.
func fmtWait(sec float64) string {
	if sec <= 0 {
		return "none"
	}
	return fmtEstimate(time.Duration(sec * float64(time.Second)))
}

// runEstimate words a job's expected run time: "unknown" when the
// command has never run on the card (the figure would be another
// command's).
func runEstimate(sec float64, known bool) string {
	if !known {
		return "an unknown time (its command has not run on this card yet)"
	}
	return fmtEstimate(time.Duration(sec * float64(time.Second)))
}

// remaining words a running job's expected rest: how long is left, how far
// it is past its estimate, or unknown.
func remaining(j api.Job) string {
	switch {
	case !j.EstimateKnown:
		return "time left unknown (its command has not run on this card yet)"
	case j.OverdueSec > 0:
		return "overdue by " + fmtDuration(time.Duration(j.OverdueSec*float64(time.Second)).Round(time.Second)) +
			" (estimated " + fmtEstimate(time.Duration(j.EstimatedRunSec*float64(time.Second))) + ")"
	}
	return fmtEstimate(time.Duration(j.EstimatedRemainingSec*float64(time.Second))) + " left"
}

// fmtSeconds and fmtDuration print a duration compactly: 0s, 45s, 1m20s,
// 2h05m.
func fmtSeconds(s float64) string { return fmtDuration(time.Duration(s * float64(time.Second))) }

func fmtDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case d > 0 && d < time.Second:
		return d.Round(time.Millisecond).String()
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	default:
		return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
	}
}

// shortIDs is ids shortened and joined with commas, for one line.
func shortIDs(ids []string) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = shortID(id)
	}
	return strings.Join(parts, ",")
}
