package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/api"
)

// An agent's job (submitted through tt-device-queue mcp) carries the
// agent's name: on its record, in the list, in status while it runs, and
// in its environment as TT_QUEUE_AGENT, where otelcol-tt's attribution and
// the job itself can read it (docs/agents.md).
func TestAPI_AgentIsRecordedShownAndExported(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	gate, open := d.gate()
	res, err := d.client.Queue(d.ctx(), api.QueueRequest{
		Cmd: `echo "agent=$TT_QUEUE_AGENT"; ` + gate, Cwd: d.work, DeviceID: "1", Agent: "claude-code"})
	if err != nil {
		t.Fatal(err)
	}
	d.waitOutput(res.JobID, "agent=claude-code")
	st, err := d.client.Status(d.ctx())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range st.Cards {
		if c.Current != nil && c.Current.ID == res.JobID {
			found = c.Current.Agent == "claude-code"
		}
	}
	if !found {
		t.Errorf("status does not show the running job's agent: %+v", st.Cards)
	}
	open()
	j := d.result(res.JobID)
	if j.Agent != "claude-code" {
		t.Errorf("job record agent = %q, want claude-code", j.Agent)
	}
	list, err := d.client.List(d.ctx(), api.ListQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) == 0 || list[0].Agent != "claude-code" {
		t.Errorf("list does not show the agent: %+v", list)
	}
	plain := d.queue("0", "true")
	if j := d.result(plain.JobID); j.Agent != "" {
		t.Errorf("a job without an agent shows agent %q", j.Agent)
	}
}

// agent is validated as client_id is: bounded, no control characters.
func TestAPI_AgentIsValidated(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	for name, agent := range map[string]string{
		"long":    strings.Repeat("a", api.MaxAgentBytes+1),
		"control": "a\nb",
		"escape":  "a\x1b[31mb",
	} {
		code, body := d.raw("POST", "/queue", `{"cmd":"true","cwd":"`+d.work+`","agent":`+string(must(json.Marshal(agent)))+`}`, nil)
		if code != 400 || !strings.Contains(body, "agent") {
			t.Errorf("%s: got %d %s, want 400 naming agent", name, code, body)
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
