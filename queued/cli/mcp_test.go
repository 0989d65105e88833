package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ttkit/ttkit/queued/api"
)

// mcpSession starts `tt-device-queue mcp` (the real binary, over stdio)
// against d with the official Go SDK's client named agent, and returns
// the session and the progress messages it received.
func mcpSession(t *testing.T, d *daemon, agent string) (*mcp.ClientSession, *progressLog) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.Command(filepath.Join(bin, "tt-device-queue"), "mcp")
	cmd.Env = d.env
	cmd.Dir = d.home
	progress := &progressLog{}
	client := mcp.NewClient(&mcp.Implementation{Name: agent, Version: "1.0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			progress.add(r.Params.Message)
		}})
	s, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to tt-device-queue mcp: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, progress
}

type progressLog struct {
	mu   sync.Mutex
	msgs []string
}

func (p *progressLog) add(m string) { p.mu.Lock(); p.msgs = append(p.msgs, m); p.mu.Unlock() }
func (p *progressLog) all() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.msgs, "\n")
}

// call calls a tool and decodes its structured result into out; it
// returns the result for its text and error flag.
func call(t *testing.T, s *mcp.ClientSession, tool string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if out != nil && !res.IsError {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: structured content %s: %v", tool, b, err)
		}
	}
	return res
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// The MCP server lists its ten tools, each with an input and an output
// schema, and speaks the newest protocol version its SDK supports.
func TestMCP_ListsToolsWithSchemas(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	s, _ := mcpSession(t, d, "schema-check")
	if v := s.InitializeResult().ProtocolVersion; v != mcp.SupportedProtocolVersions()[0] {
		t.Errorf("protocol version %q, want the newest the SDK supports, %q", v, mcp.SupportedProtocolVersions()[0])
	}
	tools, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"tt_run", "tt_submit", "tt_job", "tt_wait", "tt_logs", "tt_kill", "tt_status", "tt_list", "tt_reset"}
	got := map[string]*mcp.Tool{}
	for _, tl := range tools.Tools {
		got[tl.Name] = tl
	}
	for _, name := range want {
		tl := got[name]
		if tl == nil {
			t.Errorf("no tool %s", name)
			continue
		}
		if tl.InputSchema == nil || tl.OutputSchema == nil || tl.Description == "" {
			t.Errorf("%s: want input and output schemas and a description: %+v", name, tl)
		}
	}
	in, _ := json.Marshal(got["tt_run"].InputSchema)
	for _, field := range []string{"command", "device", "cwd", "timeout_sec", "repeat", "env", "wait_timeout_sec", "output_limit"} {
		if !strings.Contains(string(in), `"`+field+`"`) {
			t.Errorf("tt_run's input schema lacks %s: %s", field, in)
		}
	}
}

// tt_run queues, waits and answers with the exit status, the outcome and
// the output, bounded (head and tail, the cut said); the job carries the
// agent's name from the handshake, which the job sees as TT_QUEUE_AGENT
// and the CLI's job and list show.
func TestMCP_RunRecordsTheAgentAndBoundsTheOutput(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	s, _ := mcpSession(t, d, "claude-code")
	var out struct {
		Job struct {
			JobID    string `json:"job_id"`
			Outcome  string `json:"outcome"`
			ExitCode *int   `json:"exit_code"`
			Agent    string `json:"agent"`
			Device   string `json:"device"`
		} `json:"job"`
		Output    string `json:"output"`
		OutputCut string `json:"output_cut"`
	}
	r := call(t, s, "tt_run", map[string]any{"command": `echo "agent=$TT_QUEUE_AGENT"; exit 3`, "device": "1"}, &out)
	if r.IsError || out.Job.ExitCode == nil || *out.Job.ExitCode != 3 || out.Job.Outcome != "failure" || out.Job.Device != "1" {
		t.Fatalf("tt_run: %s %+v", text(r), out)
	}
	if out.Output != "agent=claude-code\n" || out.Job.Agent != "claude-code" || !strings.Contains(text(r), "agent=claude-code") {
		t.Errorf("tt_run output %q agent %q text %q", out.Output, out.Job.Agent, text(r))
	}
	d.run("job", out.Job.JobID).want(t, 0, []string{"agent", "claude-code"}, nil)
	d.run("list").want(t, 0, []string{"claude-code"}, nil)
	var j api.Job
	decode(t, d.run("--json", "job", out.Job.JobID), &j)
	if j.Agent != "claude-code" {
		t.Errorf("job --json agent %q", j.Agent)
	}

	r = call(t, s, "tt_run", map[string]any{"command": `seq 1 20000`, "output_limit": 1000}, &out)
	if r.IsError || len(out.Output) > 1100 || !strings.HasPrefix(out.Output, "1\n2\n") || !strings.HasSuffix(out.Output, "19999\n20000\n") || out.OutputCut == "" {
		t.Errorf("bounded output: %d bytes, cut %q, starts %q", len(out.Output), out.OutputCut, out.Output[:min(20, len(out.Output))])
	}
}

// tt_run takes the job options the CLI's run takes: a job silent past
// idle_timeout_sec ends hung and, with retries, runs again; the answer
// says which attempt it was.
func TestMCP_RunTakesIdleTimeoutAndRetries(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	s, _ := mcpSession(t, d, "claude-code")
	work := t.TempDir()
	var out struct {
		Job struct {
			JobID   string `json:"job_id"`
			Outcome string `json:"outcome"`
			Attempt int    `json:"attempt"`
			Retries int    `json:"retries"`
		} `json:"job"`
	}
	// The first attempt goes silent and is ended hung; the second ends at once.
	cmd := fmt.Sprintf(`if [ -e %[1]s/tried ]; then echo again; else touch %[1]s/tried; sleep 60; fi`, work)
	r := call(t, s, "tt_run", map[string]any{"command": cmd, "idle_timeout_sec": 1, "retries": 1}, &out)
	if r.IsError || out.Job.Outcome != "success" || out.Job.Attempt != 2 || out.Job.Retries != 1 {
		t.Fatalf("tt_run with idle_timeout_sec and retries: %s %+v", text(r), out)
	}
	var j api.Job
	decode(t, d.run("--json", "job", out.Job.JobID), &j)
	if j.IdleTimeout != 1 || j.Retries != 1 || len(j.Attempts) != 1 || j.Attempts[0].Outcome != "hung" {
		t.Errorf("job --json: idle %d retries %d attempts %+v", j.IdleTimeout, j.Retries, j.Attempts)
	}
}

// tt_submit takes after and after_mode as the CLI's --after does: the
// second job waits for the first and runs once it has succeeded.
func TestMCP_SubmitAfter(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	s, _ := mcpSession(t, d, "claude-code")
	work := t.TempDir()
	var first, second struct {
		JobID string `json:"job_id"`
	}
	if r := call(t, s, "tt_submit", map[string]any{"command": "sleep 1; echo a >> " + work + "/order", "device": "0"}, &first); r.IsError {
		t.Fatalf("tt_submit: %s", text(r))
	}
	if r := call(t, s, "tt_submit", map[string]any{"command": "echo b >> " + work + "/order", "device": "1",
		"after": []string{first.JobID}, "after_mode": "ok"}, &second); r.IsError {
		t.Fatalf("tt_submit after: %s", text(r))
	}
	var out struct {
		Job struct {
			Outcome string `json:"outcome"`
		} `json:"job"`
	}
	if r := call(t, s, "tt_wait", map[string]any{"job_id": second.JobID}, &out); r.IsError || out.Job.Outcome != "success" {
		t.Fatalf("tt_wait: %s %+v", text(r), out)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "order")); string(b) != "a\nb\n" {
		t.Errorf("order %q: the job on card 1 did not wait for the one on card 0", b)
	}
}

// tt_submit answers at once; tt_wait bounded by wait_timeout_sec ends the
// wait and leaves the job running; tt_logs reads its output; tt_kill
// stops it; tt_list and tt_status show it with its agent.
func TestMCP_SubmitWaitLogsKillListStatus(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	s, _ := mcpSession(t, d, "codex")
	gate := newGate(t)
	var sub struct {
		JobID    string `json:"job_id"`
		Position int    `json:"position"`
		Agent    string `json:"agent"`
	}
	r := call(t, s, "tt_submit", map[string]any{"command": "echo hello; " + gate.wait()}, &sub)
	if r.IsError || sub.JobID == "" || sub.Agent != "codex" {
		t.Fatalf("tt_submit: %s %+v", text(r), sub)
	}
	var w struct {
		Job struct {
			State string `json:"state"`
		} `json:"job"`
		WaitEnded string `json:"wait_ended"`
	}
	r = call(t, s, "tt_wait", map[string]any{"job_id": sub.JobID, "wait_timeout_sec": 1}, &w)
	if r.IsError || w.WaitEnded == "" || w.Job.State == "done" {
		t.Fatalf("tt_wait with wait_timeout_sec: %s %+v", text(r), w)
	}
	var logs struct {
		Content string `json:"content"`
	}
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(logs.Content, "hello"); {
		if time.Now().After(deadline) {
			t.Fatalf("tt_logs never showed the output: %+v", logs)
		}
		call(t, s, "tt_logs", map[string]any{"job_id": sub.JobID}, &logs)
	}
	var st struct {
		Cards []struct {
			Device  string `json:"device"`
			Running *struct {
				JobID string `json:"job_id"`
				Agent string `json:"agent"`
			} `json:"running"`
		} `json:"cards"`
	}
	call(t, s, "tt_status", nil, &st)
	if len(st.Cards) != 2 || st.Cards[0].Running == nil || st.Cards[0].Running.Agent != "codex" {
		t.Errorf("tt_status: %+v", st)
	}
	d.run("status").want(t, 0, []string{"codex"}, nil)
	var list struct {
		Jobs []struct {
			JobID string `json:"job_id"`
		} `json:"jobs"`
	}
	call(t, s, "tt_list", nil, &list)
	if len(list.Jobs) == 0 || list.Jobs[0].JobID != sub.JobID {
		t.Errorf("tt_list: %+v", list)
	}
	r = call(t, s, "tt_kill", map[string]any{"job_id": sub.JobID}, nil)
	if r.IsError {
		t.Fatalf("tt_kill: %s", text(r))
	}
	var done struct {
		Job struct {
			Outcome string `json:"outcome"`
		} `json:"job"`
	}
	call(t, s, "tt_wait", map[string]any{"job_id": sub.JobID}, &done)
	if done.Job.Outcome != "killed" {
		t.Errorf("after tt_kill: %+v", done)
	}
}

// A long tt_run reports progress when the client asks, and cancelling the
// call ends the wait, not the job.
func TestMCP_ProgressAndCancellation(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	s, progress := mcpSession(t, d, "cursor")
	gate := newGate(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	params := &mcp.CallToolParams{Name: "tt_run", Arguments: map[string]any{"command": "echo working; " + gate.wait()}}
	params.SetProgressToken("run-1")
	done := make(chan error, 1)
	go func() { _, err := s.CallTool(ctx, params); done <- err }()
	for deadline := time.Now().Add(90 * time.Second); !strings.Contains(progress.all(), "running"); {
		if time.Now().After(deadline) {
			t.Fatalf("no progress saying the job runs: %q", progress.all())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("cancelling tt_run did not end the call")
	}
	var list struct {
		Jobs []struct {
			JobID string `json:"job_id"`
			State string `json:"state"`
		} `json:"jobs"`
	}
	call(t, s, "tt_list", map[string]any{"state": "running"}, &list)
	if len(list.Jobs) != 1 {
		t.Fatalf("the job did not go on after the cancelled wait: %+v", list)
	}
	gate.open(t)
	var w struct {
		Job struct {
			Outcome string `json:"outcome"`
		} `json:"job"`
	}
	call(t, s, "tt_wait", map[string]any{"job_id": list.Jobs[0].JobID}, &w)
	if w.Job.Outcome != "success" {
		t.Errorf("the job after the cancelled wait: %+v", w)
	}
}

// Errors are tool errors in the CLI's words, naming the bad field; the
// server goes on serving after them.
func TestMCP_ErrorsAreToolErrors(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	s, _ := mcpSession(t, d, "errors")
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"tt_run", map[string]any{"command": "true", "device": "7"}, "device"},
		{"tt_run", map[string]any{"command": "true", "device": "x"}, "device"},
		{"tt_run", map[string]any{"command": ""}, "command"},
		{"tt_run", map[string]any{"command": "true", "output_limit": -1}, "output_limit"},
		{"tt_submit", map[string]any{"command": "true", "env": map[string]any{"TT_QUEUE_AGENT": "x"}}, "env"},
		{"tt_submit", map[string]any{"command": "true", "repeat": -2}, "repeat"},
		{"tt_submit", map[string]any{"command": "true", "retries": 11}, "retries"},
		{"tt_submit", map[string]any{"command": "true", "after": []string{"x"}, "after_mode": "sometimes"}, "after_mode"},
		{"tt_submit", map[string]any{"command": "true", "idle_timeout_sec": -1}, "idle_timeout_sec"},
		{"tt_job", map[string]any{"job_id": "ffffffffff"}, "queued refused the request"},
		{"tt_reset", map[string]any{}, "device or job_id"},
		{"tt_reset", map[string]any{"device": "9"}, "9"},
		{"tt_logs", map[string]any{"job_id": "abcdef", "offset": -1}, "offset"},
	} {
		r := call(t, s, c.tool, c.args, nil)
		if !r.IsError || !strings.Contains(text(r), c.want) {
			t.Errorf("%s %v: want a tool error naming %q, got error=%v %q", c.tool, c.args, c.want, r.IsError, text(r))
		}
	}
	var rs struct {
		Resets []struct {
			Summary string `json:"summary"`
		} `json:"resets"`
	}
	if r := call(t, s, "tt_reset", map[string]any{"device": "1"}, &rs); r.IsError || len(rs.Resets) != 1 {
		t.Errorf("tt_reset after the errors: %s", text(r))
	}
}

// Without queued, every tool answers with the CLI's message saying how to
// start it, and the server does not crash.
func TestMCP_QueuedNotRunning(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.cmd.Process.Kill()
	<-d.exited
	s, _ := mcpSession(t, d, "nobody-home")
	for range 2 {
		r := call(t, s, "tt_status", nil, nil)
		if !r.IsError || !strings.Contains(text(r), "systemctl --user start queued") {
			t.Errorf("tt_status without queued: error=%v %q", r.IsError, text(r))
		}
	}
}
