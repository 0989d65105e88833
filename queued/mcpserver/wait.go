package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ttkit/ttkit/queued/api"
)

// Output limits of tt_run and tt_wait: an agent's context is small, a
// job's output may be 16 MiB.
const (
	// DefaultOutputLimit is output_limit's default.
	DefaultOutputLimit = 16 << 10
	// MaxOutputLimit bounds output_limit.
	MaxOutputLimit = 1 << 20
)

// progressEvery is how often a wait reports progress when the client
// asked for it.
const progressEvery = 5 * time.Second

// WaitInput bounds a wait and the output it returns (tt_run, tt_wait).
type WaitInput struct {
	WaitTimeoutSec int64 `json:"wait_timeout_sec,omitempty" jsonschema:"Stop waiting after this many seconds and answer with the job still queued or running; the job goes on (tt_wait waits again, tt_kill stops it). 0 (the default) waits until it ends."`
	OutputLimit    int64 `json:"output_limit,omitempty" jsonschema:"At most this many bytes of output in the answer (default 16384, at most 1048576): the head and the tail, and what was cut between them is said; tt_logs reads the rest."`
}

// RunOutput is tt_run's and tt_wait's answer.
type RunOutput struct {
	Job       JobView `json:"job"`
	Output    string  `json:"output" jsonschema:"The job's output (stdout and stderr), bounded by output_limit; empty while it has not ended."`
	OutputCut string  `json:"output_cut,omitempty" jsonschema:"Set when the output was cut to output_limit: what was left out and how to read it."`
	WaitEnded string  `json:"wait_ended,omitempty" jsonschema:"Set when the wait ended before the job did (wait_timeout_sec): the job goes on."`
}

// check validates the wait options, naming the field at fault.
func (w WaitInput) check() (time.Duration, int64, error) {
	switch {
	case w.WaitTimeoutSec < 0:
		return 0, 0, fmt.Errorf("wait_timeout_sec %d: want 0 (until the job ends) or more seconds", w.WaitTimeoutSec)
	case w.OutputLimit < 0 || w.OutputLimit > MaxOutputLimit:
		return 0, 0, fmt.Errorf("output_limit %d: want 0 (the default, %d) to %d bytes", w.OutputLimit, DefaultOutputLimit, MaxOutputLimit)
	}
	limit := w.OutputLimit
	if limit == 0 {
		limit = DefaultOutputLimit
	}
	return time.Duration(w.WaitTimeoutSec) * time.Second, limit, nil
}

// await waits for job id to end, at most timeout (0: no bound), sending
// progress notifications when the client asked for them, and answers with
// the job and its bounded output. The client's cancellation ends the wait
// (ctx), never the job.
func (s *server) await(ctx context.Context, req *mcp.CallToolRequest, c *api.Client, id string, timeout time.Duration, limit int64) (*mcp.CallToolResult, RunOutput, error) {
	token := req.Params.GetProgressToken()
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	sent := 0
	for {
		step := api.MaxWait
		if token != nil {
			step = progressEvery
		}
		if !deadline.IsZero() {
			step = min(step, time.Until(deadline))
		}
		j, err := c.Result(ctx, id, max(step, 0))
		if err != nil {
			return nil, RunOutput{}, s.fail(ctx, "waiting for job "+id, err)
		}
		if j.Done() {
			return s.finished(ctx, c, j, limit)
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			out := RunOutput{Job: viewOf(j), WaitEnded: fmt.Sprintf("wait_timeout_sec ran out with the job %s; it goes on: tt_wait waits again, tt_kill stops it", j.State)}
			return textResult(describe(j) + "\n" + out.WaitEnded), out, nil
		}
		if token != nil {
			sent++
			msg := describe(j)
			if j.State == "running" {
				if last := s.lastLine(ctx, c, j); last != "" {
					msg += "; last line: " + last
				}
			}
			// A client that went away ends the wait through ctx; a lost
			// notification is no reason to stop waiting.
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(sent), Message: msg})
		}
	}
}

// lastLine is the last line of j's output so far, cut to 200 bytes.
func (s *server) lastLine(ctx context.Context, c *api.Client, j api.Job) string {
	if j.LogBytes == 0 {
		return ""
	}
	ch, err := c.Logs(ctx, j.ID, api.LogsQuery{Offset: max(j.LogBytes-512, 0), Limit: 512})
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(ch.Data), "\n"), "\n")
	last := strings.ToValidUTF8(lines[len(lines)-1], "\uFFFD")
	if len(last) > 200 {
		last = strings.ToValidUTF8(last[len(last)-200:], "")
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, last)
}

// finished answers with the ended job j and at most limit bytes of its
// output: all of it when it fits, else its head and tail.
func (s *server) finished(ctx context.Context, c *api.Client, j api.Job, limit int64) (*mcp.CallToolResult, RunOutput, error) {
	out := RunOutput{Job: viewOf(j)}
	text, cut, err := readOutput(ctx, c, j.ID, limit)
	if err != nil {
		return nil, RunOutput{}, s.fail(ctx, "reading the output of job "+j.ID, err)
	}
	out.Output, out.OutputCut = text, cut
	if j.LogCutBytes > 0 {
		out.OutputCut = strings.TrimSpace(out.OutputCut + fmt.Sprintf(" queued itself kept only part of the job's output: %d bytes from offset %d were dropped (TT_DEVICE_MAX_LOG_BYTES).", j.LogCutBytes, j.LogCutAt))
	}
	summary := describe(j)
	if out.OutputCut != "" {
		summary += "\n[" + out.OutputCut + "]"
	}
	return textResult(summary + "\n" + out.Output), out, nil
}

// readOutput reads job id's output: whole when it is at most limit bytes,
// else its first and last limit/2 bytes, with a note of what was cut.
func readOutput(ctx context.Context, c *api.Client, id string, limit int64) (string, string, error) {
	head, err := c.Logs(ctx, id, api.LogsQuery{Offset: 0, Limit: limit})
	if err != nil {
		return "", "", err
	}
	size := head.Size
	if size <= limit {
		data := head.Data
		for next := head.NextOffset; int64(len(data)) < size && next < size; {
			ch, err := c.Logs(ctx, id, api.LogsQuery{Offset: next, Limit: limit - int64(len(data))})
			if err != nil {
				return "", "", err
			}
			if len(ch.Data) == 0 {
				break
			}
			data, next = append(data, ch.Data...), ch.NextOffset
		}
		return strings.ToValidUTF8(string(data), "\uFFFD"), "", nil
	}
	half := limit / 2
	tail, err := c.Logs(ctx, id, api.LogsQuery{Offset: size - half, Limit: half})
	if err != nil {
		return "", "", err
	}
	headData := head.Data[:min(int64(len(head.Data)), half)]
	cut := size - int64(len(headData)) - int64(len(tail.Data))
	note := fmt.Sprintf("output is %d bytes, above output_limit %d: showing the first %d and the last %d; %d bytes between offsets %d and %d are left out (tt_logs reads them)",
		size, limit, len(headData), len(tail.Data), cut, len(headData), size-int64(len(tail.Data)))
	text := string(headData) + fmt.Sprintf("\n[... %d bytes cut ...]\n", cut) + string(tail.Data)
	return strings.ToValidUTF8(text, "\uFFFD"), note, nil
}

// textResult is a result whose text, for clients that read only text, is
// s; the structured content is the tool's output.
func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
