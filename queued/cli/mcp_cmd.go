package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/mcpserver"
	"github.com/ttkit/ttkit/queued/version"
)

// McpCmd serves the Model Context Protocol on stdin and stdout, so that
// an AI agent's client (Claude Code, Codex, Cursor) runs device work
// through the queue: `claude mcp add tt-device-queue -- tt-device-queue
// mcp`. It reaches queued exactly as the other commands do (the global
// options, the same socket discovery and identity), so an agent can do
// nothing its user cannot; docs/agents.md says how to register it.
type McpCmd struct{}

// Run serves until the client closes stdin. It connects to queued on each
// tool call, so it starts (and answers with how to start queued) even
// while queued is down.
func (m *McpCmd) Run(a *App) error {
	cwd, err := os.Getwd()
	if err != nil {
		return usageErr("finding the current directory, the jobs' default cwd: %w", err)
	}
	opt := mcpserver.Options{
		Connect: func() (*api.Client, error) {
			c, err := a.connect()
			var e *Error
			if errors.As(err, &e) && e.Err != nil {
				return nil, e.Err
			}
			return c, err
		},
		Explain: func(err error) error {
			if e := a.explain(a.ctx, err); e.Err != nil {
				return e.Err
			}
			return err
		},
		ClientID: a.clientID(),
		Cwd:      cwd,
		ShellEnv: fromShell(os.Environ(), false),
		Version:  version.String(),
	}
	if err := mcpserver.Run(a.ctx, opt); err != nil {
		return fmt.Errorf("tt-device-queue mcp: %w", err)
	}
	return nil
}
