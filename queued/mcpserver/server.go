// Package mcpserver is tt-device-queue mcp: a Model Context Protocol
// server on stdio, so that AI coding agents (Claude Code, Codex, Cursor)
// run their device work through queued's per-card queues instead of
// opening the cards behind everyone's back. It is a client of queued like
// the CLI, and only that: the command in queued/cli hands it the CLI's own
// connection (the same socket discovery, identity and permissions) and
// error wording, so an agent can do nothing its user cannot do with the
// CLI, and the server opens no port.
//
// Every tool has an input and an output schema (inferred from the Go
// types below by the SDK, which also refuses input that does not match
// them, naming the field), answers with structured content and a short
// text for clients that read text only, and reports a failure as a tool
// error in the CLI's words, never as a crash of the server.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ttkit/ttkit/queued/api"
)

// Name is the server's name in the MCP handshake.
const Name = "tt-device-queue"

// Options are what the CLI hands the server.
type Options struct {
	// Connect returns the client of the queued the CLI would talk to,
	// or an error in the CLI's words (queued not running and how to
	// start it). It is called for every tool call, so a queued started
	// after the server is found; it must be safe for concurrent use.
	Connect func() (*api.Client, error)
	// Explain turns an error of the client into the CLI's message for it
	// (queued refused the request: ..., cannot reach queued at ...).
	Explain func(error) error
	// ClientID is the client id recorded on jobs (the CLI's --client-id
	// or the user name), which tt_list selects the caller's jobs by.
	ClientID string
	// Cwd is the default working directory of a job: the server's own,
	// which an agent's client starts in the project.
	Cwd string
	// ShellEnv is the toolchain variables of the server's environment
	// (PATH, VIRTUAL_ENV, TT_METAL_*, ...), sent with every job as the
	// CLI sends its shell's, so a job finds the same python3 and tt-metal.
	ShellEnv map[string]string
	// Version is the server's version in the handshake.
	Version string
}

// server is one MCP server and its link to queued.
type server struct {
	opt Options
	// mu serialises Connect, which the CLI does not make concurrently.
	mu sync.Mutex
}

// New returns the MCP server with every tool of tt-device-queue mcp.
func New(opt Options) *mcp.Server {
	s := &server{opt: opt}
	srv := mcp.NewServer(&mcp.Implementation{Name: Name, Title: "Tenstorrent card queue (queued)", Version: opt.Version},
		&mcp.ServerOptions{Instructions: instructions, Capabilities: &mcp.ServerCapabilities{}})
	s.addJobTools(srv)
	s.addCardTools(srv)
	return srv
}

// instructions tell the agent's model, once, how to use the tools.
const instructions = "Run every command that uses a Tenstorrent card (pytest of device code, kernels, tt-smi, " +
	"programs that open /dev/tenstorrent) through tt_run or tt_submit, never directly: queued runs one job at a " +
	"time per card, in submission order, so your job does not collide with other users' or agents'. Pick the card " +
	"with device (\"0\", \"0,1\", \"0-3\"). tt_status shows the cards, their queues and estimated waits."

// Run serves the MCP protocol on stdin and stdout until the client ends
// the session or ctx ends.
func Run(ctx context.Context, opt Options) error {
	if err := New(opt).Run(ctx, &mcp.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("serving MCP on stdio: %w", err)
	}
	return nil
}

// client connects to queued.
func (s *server) client() (*api.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opt.Connect()
}

// fail words err for the agent: the CLI's message for an error of
// queued's client, or a note that the client cancelled the call (the job
// goes on either way).
func (s *server) fail(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: the call was cancelled; a job it queued goes on (tt_kill stops it)", what)
	}
	return fmt.Errorf("%s: %w", what, s.opt.Explain(err))
}

// agentOf is the MCP client's name from its handshake (clientInfo.name),
// as agentName cleans it.
func agentOf(req *mcp.CallToolRequest) string {
	name := ""
	if info := req.ClientInfo(); info != nil {
		name = info.Name
	}
	return agentName(name)
}

// agentName cuts and cleans a client's name to what queued accepts as a
// job's agent (printable, at most api.MaxAgentBytes, cut between
// characters), or "mcp" when nothing is left: the name is the client's
// word, and a bad one must not cost the agent its job.
func agentName(name string) string {
	out := make([]rune, 0, len(name))
	n := 0
	for _, r := range name {
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			continue
		}
		if n += len(string(r)); n > api.MaxAgentBytes {
			break
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return "mcp"
	}
	return string(out)
}
