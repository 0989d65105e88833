// Package smoke is the hardware smoke test a card owner runs after
// `tt-device-queue doctor` (make smoke): on one idle card, through the
// installed queued and otelcol-tt, it resets the card (queued runs the
// reset and the health check), runs a tiny job that opens the card and
// holds it, and checks that otelcol-tt reports the job's process as a
// tt_process series with the friendly name its command line gets. It ends
// with a short report to paste into a bug report.
//
// The tests run the same code against a real queued on a fake KMD tree,
// with commands that stand in for tt-smi and the health check and an HTTP
// server that stands in for otelcol-tt's Prometheus endpoint; only the
// commands and addresses differ.
package smoke

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ttkit/ttkit/internal/friendlyname"
	"github.com/ttkit/ttkit/queued/api"
)

// ErrBusy is returned when the card has a job, a queued job, a reset or a
// foreign holder: the smoke test resets the card, so it never runs on a
// card someone is using.
var ErrBusy = errors.New("card is busy")

// HolderScript is the file name of the job's Python program, so its
// friendly name is recognisable in otelcol-tt's output.
const HolderScript = "tt_smoke_holder.py"

// holder opens the card and holds it until the stop file appears (or the
// limit in seconds passes, should the smoke test itself die).
const holder = `import os, sys, time
dev, stop, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
fd = os.open(dev, os.O_RDWR)
print("pid %d holds %s" % (os.getpid(), dev), flush=True)
deadline = time.monotonic() + limit
while not os.path.exists(stop):
    if time.monotonic() > deadline:
        sys.exit("the smoke test never said stop")
    time.sleep(0.05)
os.close(fd)
print("released", dev, flush=True)
`

// Options say which card and which services to use.
type Options struct {
	// Card is the card to test.
	Card int
	// Queued is the client of the installed queued; QueuedAt names it.
	Queued   *api.Client
	QueuedAt string
	// MetricsURL is otelcol-tt's Prometheus endpoint.
	MetricsURL string
	// DevDir holds the card's device node; Python runs the holder job.
	DevDir, Python string
	// KMDVersionFile is read for the report ("" or unreadable: unknown).
	KMDVersionFile string
	// ResetTimeout bounds the reset and health check; MetricsWait how long
	// otelcol-tt has to report the holder (it collects every 10 s).
	ResetTimeout, MetricsWait time.Duration
	// Progress gets a line as each step starts; may be nil.
	Progress io.Writer
}

// Run runs the smoke test. It returns ErrBusy (wrapped, with who is using
// the card) before touching a busy card, another error when it cannot
// start at all, and otherwise the report, whose Passed says the verdict.
func Run(ctx context.Context, o Options) (*Report, error) {
	say := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, format+"\n", args...)
		}
	}
	st, err := o.Queued.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("asking queued at %s for its status: %w", o.QueuedAt, err)
	}
	card, err := findCard(st, o.Card)
	if err != nil {
		return nil, err
	}
	if why := busy(card); why != "" {
		return nil, fmt.Errorf("card %d: %w: %s; run the smoke test on an idle card (SMOKE_CARD=N)", o.Card, ErrBusy, why)
	}
	host, _ := os.Hostname()
	r := &Report{Card: o.Card, Host: host, QueuedVersion: st.Version, KMDVersion: "unknown", MetricsURL: o.MetricsURL}
	if b, err := os.ReadFile(o.KMDVersionFile); err == nil {
		r.KMDVersion = strings.TrimSpace(string(b))
	}
	dev := filepath.Join(o.DevDir, strconv.Itoa(o.Card))
	r.Device = dev

	say("resetting card %d (reset command, then health check)...", o.Card)
	r.Reset = reset(ctx, o)
	if !r.Reset.OK {
		return r, nil
	}
	say("running a job that holds %s...", dev)
	r.Job, r.Metric = holdAndWatch(ctx, o, dev, say)
	r.Passed = r.Reset.OK && r.Job.OK && r.Metric.OK
	return r, nil
}

func findCard(st api.Status, n int) (api.CardStatus, error) {
	var ids []string
	for _, c := range st.Cards {
		if c.DeviceID == strconv.Itoa(n) {
			return c, nil
		}
		ids = append(ids, c.DeviceID)
	}
	return api.CardStatus{}, fmt.Errorf("queued serves no card %d (it serves %s)", n, strings.Join(ids, ", "))
}

// busy says who is using the card, "" when nobody is.
func busy(c api.CardStatus) string {
	var why []string
	if c.Current != nil {
		why = append(why, fmt.Sprintf("%s %s is running", kindOf(c.Current.Kind), c.Current.ID))
	}
	if len(c.Pending) > 0 {
		why = append(why, fmt.Sprintf("%d jobs are queued", len(c.Pending)))
	}
	if c.Reset != nil && c.Current == nil {
		why = append(why, "a reset is "+c.Reset.State)
	}
	for _, h := range c.Foreign {
		why = append(why, fmt.Sprintf("pid %d (%s) holds it outside the queue", h.PID, h.FriendlyName))
	}
	return strings.Join(why, "; ")
}

func kindOf(k string) string {
	if k == "" {
		return "job"
	}
	return k
}

// reset asks queued to reset the card and waits for the reset job, which
// runs the reset command and then the health check.
func reset(ctx context.Context, o Options) Step {
	s := Step{Name: "reset"}
	start := time.Now()
	resp, err := o.Queued.Reset(ctx, api.ResetRequest{DeviceID: strconv.Itoa(o.Card)})
	if err != nil {
		s.Detail = fmt.Sprintf("asking for the reset: %v", err)
		return s
	}
	if len(resp.Resets) != 1 || resp.Resets[0].ResetJobID == "" {
		s.Detail = fmt.Sprintf("queued scheduled no reset: %+v", resp.Resets)
		return s
	}
	id := resp.Resets[0].ResetJobID
	wctx, cancel := context.WithTimeout(ctx, o.ResetTimeout)
	defer cancel()
	j, err := o.Queued.WaitResult(wctx, id)
	s.Took = time.Since(start)
	if err != nil {
		s.Detail = fmt.Sprintf("waiting for reset job %s: %v", id, err)
		return s
	}
	// The health check's own last line, then the ladder's lines after it
	// (its exit, the gate's verdict, the recovery).
	tail := outputTail(ctx, o.Queued, id, 4)
	if j.Outcome != "success" {
		s.Detail = fmt.Sprintf("reset job %s ended %s: %s; its output ends: %s", id, j.Outcome, j.Error, tail)
		return s
	}
	s.OK = true
	s.Detail = fmt.Sprintf("reset job %s: reset, health check and gate passed; output ends: %s", id, tail)
	return s
}

// outputTail is the last n lines of a job's output, quoted and joined, for
// the report.
func outputTail(ctx context.Context, c *api.Client, id string, n int) string {
	chunk, err := c.Logs(ctx, id, api.LogsQuery{})
	if err != nil {
		return fmt.Sprintf("(no output: %v)", err)
	}
	text := strings.TrimSpace(string(chunk.Data))
	if text == "" {
		return "(none)"
	}
	lines := strings.Split(text, "\n")
	lines = lines[max(0, len(lines)-n):]
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if len(l) > 160 {
			l = l[:160] + "..."
		}
		lines[i] = strconv.Quote(l)
	}
	return strings.Join(lines, ", ")
}

// holdAndWatch queues the holder job, waits for it to run, watches the
// metrics for its process, then lets it end.
func holdAndWatch(ctx context.Context, o Options, dev string, say func(string, ...any)) (job, metric Step) {
	job, metric = Step{Name: "job"}, Step{Name: "otelcol-tt"}
	dir, err := os.MkdirTemp("", "tt-smoke-")
	if err != nil {
		job.Detail = fmt.Sprintf("making the job's directory: %v", err)
		return job, metric
	}
	defer os.RemoveAll(dir)
	script, stop := filepath.Join(dir, HolderScript), filepath.Join(dir, "stop")
	if err := os.WriteFile(script, []byte(holder), 0o644); err != nil {
		job.Detail = fmt.Sprintf("writing %s: %v", script, err)
		return job, metric
	}
	limit := o.MetricsWait + 2*time.Minute
	argv := []string{o.Python, script, dev, stop, strconv.Itoa(int(limit.Seconds()))}
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = shellQuote(a)
	}
	start := time.Now()
	q, err := o.Queued.Queue(ctx, api.QueueRequest{
		Cmd: "exec " + strings.Join(quoted, " "), Cwd: dir, DeviceID: strconv.Itoa(o.Card),
		Timeout: int64(limit.Seconds()) + 60, ClientID: "smoke-test",
	})
	if err != nil {
		job.Detail = fmt.Sprintf("queueing the job: %v", err)
		return job, metric
	}
	// Whatever happens from here on, the job is told to stop and waited
	// for, so the card is left idle.
	defer func() {
		os.WriteFile(stop, nil, 0o644)
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		j, err := o.Queued.WaitResult(wctx, q.JobID)
		job.Took = time.Since(start)
		switch {
		case err != nil:
			job.OK, job.Detail = false, fmt.Sprintf("waiting for job %s: %v", q.JobID, err)
		case j.Outcome != "success":
			job.OK, job.Detail = false, fmt.Sprintf("job %s ended %s (exit %s): %s; its output ends: %s", q.JobID, j.Outcome, exitOf(j), j.Error, outputTail(ctx, o.Queued, q.JobID, 2))
		case job.OK:
			job.Detail += ", exit 0"
		}
	}()
	pid, err := runningPID(ctx, o.Queued, q.JobID)
	if err != nil {
		job.Detail = err.Error()
		metric.Detail = "skipped: the job never ran"
		return job, metric
	}
	job.OK = true
	job.Detail = fmt.Sprintf("job %s, pid %d opened %s", q.JobID, pid, dev)
	want := friendlyname.Derive(strings.Join(argv, " "))
	say("waiting up to %s for otelcol-tt to report pid %d as %q...", o.MetricsWait, pid, want)
	metric = watchMetrics(ctx, o, pid, want)
	return job, metric
}

// runningPID polls the job until it runs and has a PID (or ends).
func runningPID(ctx context.Context, c *api.Client, id string) (int, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		j, err := c.Job(ctx, id)
		if err != nil {
			return 0, fmt.Errorf("reading job %s: %w", id, err)
		}
		if j.State == "running" && j.PID > 0 {
			return j.PID, nil
		}
		if j.Done() {
			return 0, fmt.Errorf("job %s ended %s before it could be watched: %s; its output ends: %s", id, j.Outcome, j.Error, outputTail(ctx, c, id, 2))
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("job %s did not start within a minute (state %s)", id, j.State)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func exitOf(j api.Job) string {
	if j.ExitCode == nil {
		return "none"
	}
	return strconv.Itoa(*j.ExitCode)
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
