package mcpserver

import (
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/api"
)

// The agent name recorded on a job is the MCP client's name cleaned to
// what queued accepts (docs/agents.md, "What people see"): printable, at
// most api.MaxAgentBytes, cut on a character boundary, "mcp" when empty.
func TestAgentName_CleanedToWhatQueuedAccepts(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", api.MaxAgentBytes) // two bytes each
	for _, c := range []struct{ in, want string }{
		{"claude-code", "claude-code"},
		{"", "mcp"},
		{"\n\x1b\x7f", "mcp"},
		{"cur\x1b[31msor\n", "cur[31msor"},
		{"bad\xffutf8", "badutf8"},
		{long, strings.Repeat("é", api.MaxAgentBytes/2)},
		{strings.Repeat("a", api.MaxAgentBytes+10), strings.Repeat("a", api.MaxAgentBytes)},
	} {
		if got := agentName(c.in); got != c.want {
			t.Errorf("agentName(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
