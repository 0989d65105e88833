package cli

import (
	"testing"

	"github.com/ttkit/ttkit/queued/api"
)

// The CLI asks the status's mode, not its string: an empty one is a user
// daemon from before modes were reported, an unknown one is shown as
// given and never taken for system mode.
func TestModeOf(t *testing.T) {
	caller := &api.Caller{User: "ana", UID: 1000}
	for _, c := range []struct {
		st   api.Status
		want api.Mode
		line string
	}{
		{api.Status{Version: "v", Caller: caller}, api.UserMode, "queued v at here"},
		{api.Status{Version: "v", Mode: "user", Caller: caller}, api.UserMode, "queued v at here"},
		{api.Status{Version: "v", Mode: "system", Caller: caller}, api.SystemMode, "queued v (system mode) at here; you are ana (uid 1000)"},
		{api.Status{Version: "v", Mode: "cluster", Caller: caller}, "cluster", "queued v (cluster mode) at here"},
	} {
		if got := modeOf(c.st); got != c.want || got.System() != (c.want == api.SystemMode) {
			t.Errorf("modeOf(%q) = %q, want %q", c.st.Mode, got, c.want)
		}
		if got := daemonLine(c.st, "here"); got != c.line {
			t.Errorf("mode %q: %q, want %q", c.st.Mode, got, c.line)
		}
	}
}
