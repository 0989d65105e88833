package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/api"
)

// TestQueue_RecordBudget: a job's command and environment together may
// take at most api.MaxRecordBytes, though each is within its own limit;
// past it the submission is refused with a 400 that names both sizes and
// the limit, and nothing is queued.
func TestQueue_RecordBudget(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	cmd := "echo " + strings.Repeat("c", 100<<10)
	env := map[string]string{"A": strings.Repeat("a", 100<<10), "B": strings.Repeat("b", 100<<10)}
	body, _ := json.Marshal(api.QueueRequest{Cmd: cmd, Cwd: d.work, Env: env})
	code, answer := d.raw(http.MethodPost, "/queue", string(body), nil)
	total := len(cmd) + api.EnvBytes(env)
	if code != http.StatusBadRequest || !strings.Contains(answer, fmt.Sprint(len(cmd))) || !strings.Contains(answer, fmt.Sprint(api.EnvBytes(env))) ||
		!strings.Contains(answer, fmt.Sprint(total)) || !strings.Contains(answer, "262144") {
		t.Fatalf("a record of %d bytes: %d %s; want 400 naming the command's, the environment's and the total size and the limit 262144", total, code, answer)
	}
	if st, err := d.client.Status(d.ctx()); err != nil || st.Queued != 0 {
		t.Fatalf("queued after the refusal: %d, %v", st.Queued, err)
	}
	// Just within it, taken.
	half := (api.MaxRecordBytes - len(cmd)) / 2
	env = map[string]string{"A": strings.Repeat("a", half-len("A=")-1), "B": strings.Repeat("b", api.MaxRecordBytes-len(cmd)-half-len("B=")-1)}
	if _, err := d.client.Queue(d.ctx(), api.QueueRequest{Cmd: cmd, Cwd: d.work, Env: env}); err != nil {
		t.Fatalf("a record of exactly the budget: %v", err)
	}
}

// TestList_AnswersPreviews: GET /jobs carries a bounded preview of each
// command and no environment, whatever their size (the answer to a
// thousand maximal jobs is then well under a MiB, not hundreds of them),
// and says what it left out; GET /job gives the whole record.
func TestList_AnswersPreviews(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	const n = 20
	env := map[string]string{"BIG": strings.Repeat("e", 100<<10)}
	var last string
	for i := range n {
		cmd := fmt.Sprintf(": %s; echo %d", strings.Repeat("c", 100<<10), i)
		r, err := d.client.Queue(d.ctx(), api.QueueRequest{Cmd: cmd, Cwd: d.work, Env: env})
		if err != nil {
			t.Fatal(err)
		}
		last = r.JobID
	}
	d.result(last)
	code, body := d.raw(http.MethodGet, "/jobs?limit=1000", "", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /jobs: %d %s", code, cut(body, 200))
	}
	if len(body) > 64<<10 {
		t.Errorf("GET /jobs of %d jobs of 200 KiB answered %d bytes; want previews", n, len(body))
	}
	var list api.JobList
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Jobs) != n {
		t.Fatalf("GET /jobs: %d jobs, %v", len(list.Jobs), err)
	}
	for _, j := range list.Jobs {
		if len(j.Cmd) > 256 || j.Env != nil || !j.CmdTruncated || j.CmdBytes <= 100<<10 || j.EnvVars != 1 || j.EnvBytes != api.EnvBytes(env) {
			t.Fatalf("listed job: %d bytes of command (truncated %v, of %d), %d variables (%d of %d bytes)",
				len(j.Cmd), j.CmdTruncated, j.CmdBytes, len(j.Env), j.EnvVars, j.EnvBytes)
		}
	}
	whole, err := d.client.Job(d.ctx(), last)
	if err != nil || !strings.HasSuffix(whole.Cmd, fmt.Sprintf("; echo %d", n-1)) || whole.Env["BIG"] != env["BIG"] || whole.CmdTruncated {
		t.Fatalf("GET /job: %d bytes of command, %d variables, %v", len(whole.Cmd), len(whole.Env), err)
	}
	if out := d.result(last); out.ExitCode == nil || *out.ExitCode != 0 {
		t.Fatalf("the job ended %+v", out)
	}
}

// TestJob_BriefAnswersWithoutTheSpec: GET /job/<id>?brief=1, what the
// CLI asks every second or two while it waits for a queued job, answers
// the record as /jobs lists it (a preview of the command, no environment)
// with the job's place in the queue, not the 256 KiB the spec may take;
// a brief= that is not a yes or no is refused naming it.
func TestJob_BriefAnswersWithoutTheSpec(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	gate, release := d.gate()
	defer release()
	first, err := d.client.Queue(d.ctx(), api.QueueRequest{Cmd: gate, Cwd: d.work})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"BIG": strings.Repeat("e", 100<<10)}
	cmd := ": " + strings.Repeat("c", 100<<10) + "; echo end"
	r, err := d.client.Queue(d.ctx(), api.QueueRequest{Cmd: cmd, Cwd: d.work, Env: env, DeviceID: first.DeviceID})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"?brief=1", "?brief=true"} {
		code, body := d.raw(http.MethodGet, "/job/"+r.JobID+q, "", nil)
		var j api.Job
		if err := json.Unmarshal([]byte(body), &j); code != http.StatusOK || err != nil {
			t.Fatalf("GET /job%s: %d %s", q, code, cut(body, 200))
		}
		if len(body) > 8<<10 || len(j.Cmd) > 256 || !j.CmdTruncated || j.CmdBytes != len(cmd) || j.Env != nil || j.EnvVars != 1 ||
			j.State != "queued" || j.Position != 1 {
			t.Errorf("GET /job%s: %d bytes; %d of command (of %d), %d variables, %s at %d", q, len(body), len(j.Cmd), j.CmdBytes, len(j.Env), j.State, j.Position)
		}
	}
	brief, err := d.client.JobBrief(d.ctx(), r.JobID)
	if err != nil || brief.Env != nil || !brief.CmdTruncated || brief.Position != 1 {
		t.Errorf("Client.JobBrief: %d variables, truncated %v, position %d, %v", len(brief.Env), brief.CmdTruncated, brief.Position, err)
	}
	for _, q := range []string{"?brief=0", "?brief=false", ""} {
		code, body := d.raw(http.MethodGet, "/job/"+r.JobID+q, "", nil)
		var whole api.Job
		if err := json.Unmarshal([]byte(body), &whole); code != http.StatusOK || err != nil || whole.Cmd != cmd || whole.Env["BIG"] != env["BIG"] {
			t.Errorf("GET /job%s: %d; %d bytes of command, %d variables, %v", q, code, len(whole.Cmd), len(whole.Env), err)
		}
	}
	code, body := d.raw(http.MethodGet, "/job/"+r.JobID+"?brief=yes-please", "", nil)
	if code != http.StatusBadRequest || !strings.Contains(body, "brief") || !strings.Contains(body, "yes-please") {
		t.Errorf("brief=yes-please: %d %s; want 400 naming the value", code, cut(body, 300))
	}
}
