package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ttkit/ttkit/queued/api"
)

// RunInput is tt_run's input: a job and how to wait for it.
type RunInput struct {
	JobInput
	WaitInput
}

// SubmitOutput is tt_submit's answer.
type SubmitOutput struct {
	JobID            string  `json:"job_id" jsonschema:"The job's id, for tt_wait, tt_job, tt_logs and tt_kill."`
	Device           string  `json:"device" jsonschema:"The card (or cards) whose queue took it."`
	State            string  `json:"state" jsonschema:"queued or running."`
	Position         int     `json:"position" jsonschema:"Its place in the queue: 1 starts next."`
	EstimatedWaitSec float64 `json:"estimated_wait_sec" jsonschema:"The expected wait before it starts, in seconds."`
	Agent            string  `json:"agent" jsonschema:"The agent name recorded on the job (the MCP client's name)."`
}

// JobIDInput names one job.
type JobIDInput struct {
	JobID string `json:"job_id" jsonschema:"A job id, or a unique prefix of at least 6 characters."`
}

// WaitJobInput is tt_wait's input.
type WaitJobInput struct {
	JobIDInput
	WaitInput
}

// LogsInput is tt_logs's input.
type LogsInput struct {
	JobIDInput
	Offset int64 `json:"offset,omitempty" jsonschema:"Byte offset to read from (next_offset of the last call); default 0."`
	Limit  int64 `json:"limit,omitempty" jsonschema:"At most this many bytes (default 16384, at most 1048576)."`
}

// LogsOutput is tt_logs's answer.
type LogsOutput struct {
	Content    string `json:"content" jsonschema:"The output from offset (invalid UTF-8 replaced)."`
	Offset     int64  `json:"offset" jsonschema:"Where content starts."`
	NextOffset int64  `json:"next_offset" jsonschema:"The offset to read from next."`
	Size       int64  `json:"size" jsonschema:"The output's size so far."`
	State      string `json:"state" jsonschema:"The job's state."`
	Done       bool   `json:"done" jsonschema:"The job has ended and content reaches the end of its output."`
}

// ListInput is tt_list's input.
type ListInput struct {
	Limit int    `json:"limit,omitempty" jsonschema:"At most this many jobs (default 20)."`
	State string `json:"state,omitempty" jsonschema:"Only jobs in this state: queued, running or done."`
}

// ListOutput is tt_list's answer.
type ListOutput struct {
	Jobs []JobView `json:"jobs" jsonschema:"Your jobs: running and queued ones first, then finished ones, newest first."`
}

// addJobTools adds the tools about jobs.
func (s *server) addJobTools(srv *mcp.Server) {
	mcp.AddTool(srv, &mcp.Tool{Name: "tt_run", Title: "Run on a Tenstorrent card through the queue",
		Description: "Queue a shell command on a card's queue, wait for it to run and end, and answer with its exit status, " +
			"outcome and output (bounded by output_limit: head and tail). Use it instead of running device code directly. " +
			"With a progress token, reports the queue position, the start and the last line of output as it goes; " +
			"cancelling the call ends the wait, not the job."}, s.run)
	mcp.AddTool(srv, &mcp.Tool{Name: "tt_submit", Title: "Queue a job without waiting",
		Description: "Queue a shell command on a card's queue and answer at once with its job id, queue position and estimated wait; tt_wait waits for it."}, s.submit)
	mcp.AddTool(srv, &mcp.Tool{Name: "tt_wait", Title: "Wait for a job",
		Description: "Wait for a job to end (at most wait_timeout_sec: the job goes on when the wait ends) and answer with its exit status and bounded output."}, s.wait)
	mcp.AddTool(srv, &mcp.Tool{Name: "tt_job", Title: "A job's record",
		Description: "A job's state, position, outcome, exit status, card and agent."}, s.job)
	mcp.AddTool(srv, &mcp.Tool{Name: "tt_logs", Title: "Read a job's output",
		Description: "Read a job's output from offset, at most limit bytes; next_offset continues."}, s.logs)
	mcp.AddTool(srv, &mcp.Tool{Name: "tt_kill", Title: "Stop a job",
		Description: "Stop a job: a queued one at once, a running one with SIGINT, then SIGTERM, then SIGKILL. Only your own jobs (as the CLI)."}, s.kill)
	mcp.AddTool(srv, &mcp.Tool{Name: "tt_list", Title: "Your recent jobs",
		Description: "Your jobs: running and queued ones first, then finished ones, newest first."}, s.list)
}

func (s *server) queue(ctx context.Context, req *mcp.CallToolRequest, in JobInput) (*api.Client, api.QueueResponse, error) {
	qr, err := s.request(in, agentOf(req))
	if err != nil {
		return nil, api.QueueResponse{}, err
	}
	c, err := s.client()
	if err != nil {
		return nil, api.QueueResponse{}, err
	}
	res, err := c.Queue(ctx, qr)
	if err != nil {
		return nil, res, s.fail(ctx, "queueing the job", err)
	}
	return c, res, nil
}

func (s *server) run(ctx context.Context, req *mcp.CallToolRequest, in RunInput) (*mcp.CallToolResult, RunOutput, error) {
	timeout, limit, err := in.WaitInput.check()
	if err != nil {
		return nil, RunOutput{}, err
	}
	c, res, err := s.queue(ctx, req, in.JobInput)
	if err != nil {
		return nil, RunOutput{}, err
	}
	return s.await(ctx, req, c, res.JobID, timeout, limit)
}

func (s *server) submit(ctx context.Context, req *mcp.CallToolRequest, in JobInput) (*mcp.CallToolResult, SubmitOutput, error) {
	_, res, err := s.queue(ctx, req, in)
	if err != nil {
		return nil, SubmitOutput{}, err
	}
	out := SubmitOutput{JobID: res.JobID, Device: res.DeviceID, State: res.State, Position: res.Position,
		EstimatedWaitSec: res.EstimatedWaitSec, Agent: agentOf(req)}
	return textResult(fmt.Sprintf("job %s queued on card %s at position %d, estimated wait %s (tt_wait waits for it)",
		res.JobID, res.DeviceID, res.Position, seconds(res.EstimatedWaitSec))), out, nil
}

func (s *server) wait(ctx context.Context, req *mcp.CallToolRequest, in WaitJobInput) (*mcp.CallToolResult, RunOutput, error) {
	timeout, limit, err := in.WaitInput.check()
	if err != nil {
		return nil, RunOutput{}, err
	}
	id, err := in.id()
	if err != nil {
		return nil, RunOutput{}, err
	}
	c, err := s.client()
	if err != nil {
		return nil, RunOutput{}, err
	}
	return s.await(ctx, req, c, id, timeout, limit)
}

// id is the job id, checked.
func (in JobIDInput) id() (string, error) {
	id := strings.TrimSpace(in.JobID)
	if id == "" {
		return "", errors.New("job_id is empty: give a job id (tt_submit's job_id, tt_list's)")
	}
	return id, nil
}

func (s *server) job(ctx context.Context, _ *mcp.CallToolRequest, in JobIDInput) (*mcp.CallToolResult, JobView, error) {
	id, err := in.id()
	if err != nil {
		return nil, JobView{}, err
	}
	c, err := s.client()
	if err != nil {
		return nil, JobView{}, err
	}
	j, err := c.Job(ctx, id)
	if err != nil {
		return nil, JobView{}, s.fail(ctx, "reading job "+id, err)
	}
	return textResult(describe(j)), viewOf(j), nil
}

func (s *server) logs(ctx context.Context, _ *mcp.CallToolRequest, in LogsInput) (*mcp.CallToolResult, LogsOutput, error) {
	id, err := in.id()
	if err != nil {
		return nil, LogsOutput{}, err
	}
	switch {
	case in.Offset < 0:
		return nil, LogsOutput{}, fmt.Errorf("offset %d: want 0 or more", in.Offset)
	case in.Limit < 0 || in.Limit > MaxOutputLimit:
		return nil, LogsOutput{}, fmt.Errorf("limit %d: want 0 (the default, %d) to %d bytes", in.Limit, DefaultOutputLimit, MaxOutputLimit)
	}
	limit := in.Limit
	if limit == 0 {
		limit = DefaultOutputLimit
	}
	c, err := s.client()
	if err != nil {
		return nil, LogsOutput{}, err
	}
	ch, err := c.Logs(ctx, id, api.LogsQuery{Offset: in.Offset, Limit: limit})
	if err != nil {
		return nil, LogsOutput{}, s.fail(ctx, "reading the output of job "+id, err)
	}
	out := LogsOutput{Content: strings.ToValidUTF8(string(ch.Data), "\uFFFD"), Offset: ch.Offset, NextOffset: ch.NextOffset,
		Size: ch.Size, State: ch.State, Done: ch.Done}
	return textResult(out.Content), out, nil
}

func (s *server) kill(ctx context.Context, _ *mcp.CallToolRequest, in JobIDInput) (*mcp.CallToolResult, JobView, error) {
	id, err := in.id()
	if err != nil {
		return nil, JobView{}, err
	}
	c, err := s.client()
	if err != nil {
		return nil, JobView{}, err
	}
	j, err := c.Kill(ctx, id)
	if err != nil {
		return nil, JobView{}, s.fail(ctx, "killing job "+id, err)
	}
	return textResult("stopping " + describe(j)), viewOf(j), nil
}

func (s *server) list(ctx context.Context, _ *mcp.CallToolRequest, in ListInput) (*mcp.CallToolResult, ListOutput, error) {
	switch in.State {
	case "", "queued", "running", "done":
	default:
		return nil, ListOutput{}, fmt.Errorf("state %q: want queued, running or done", in.State)
	}
	if in.Limit < 0 || in.Limit > api.MaxListLimit {
		return nil, ListOutput{}, fmt.Errorf("limit %d: want 0 (the default, 20) to %d", in.Limit, api.MaxListLimit)
	}
	limit := in.Limit
	if limit == 0 {
		limit = 20
	}
	c, err := s.client()
	if err != nil {
		return nil, ListOutput{}, err
	}
	jobs, err := c.List(ctx, api.ListQuery{ClientID: s.opt.ClientID, Mine: true, State: in.State, Limit: limit, Kind: "job"})
	if err != nil {
		return nil, ListOutput{}, s.fail(ctx, "listing your jobs", err)
	}
	out := ListOutput{Jobs: make([]JobView, 0, len(jobs))}
	lines := make([]string, 0, len(jobs))
	for _, j := range jobs {
		out.Jobs = append(out.Jobs, viewOf(j))
		lines = append(lines, describe(j))
	}
	if len(lines) == 0 {
		lines = append(lines, "no jobs of yours")
	}
	return textResult(strings.Join(lines, "\n")), out, nil
}
