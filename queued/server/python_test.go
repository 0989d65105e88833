package server

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/scheduler"
)

// These tests send what the Python tt-device-queue's clients send and read
// its answers' keys, as a script written against that tool does, with only
// the bearer token added (see docs/switching.md).

// object sends a request and decodes its JSON object answer, failing the
// test unless the status is want.
func (d *daemon) object(method, path, body string, want int) map[string]any {
	d.t.Helper()
	code, b := d.raw(method, path, body, nil)
	if code != want {
		d.t.Fatalf("%s %s %s = %d %s; want %d", method, path, body, code, b, want)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(b), &m); err != nil {
		d.t.Fatalf("%s %s: not a JSON object: %v\n%s", method, path, err, b)
	}
	return m
}

// js is s as a JSON string.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// has fails the test unless m has every key.
func has(t *testing.T, what string, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s lacks %q: %v", what, k, m)
		}
	}
}

// The Python CLI's submission: mode "run", no cwd (optional there), the
// answer with its keys.
func TestPython_QueueTakesThePythonToolsBody(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	m := d.object(http.MethodPost, "/queue", `{"cmd":"pwd","repeat":1,"mode":"run","env":{},"client_id":"cli-0","timeout":null}`, http.StatusCreated)
	has(t, "POST /queue", m, "job_id", "output_file", "position", "estimated_wait_sec", "estimated_run_sec", "repeat", "mode", "timeout")
	if m["mode"] != "run" || m["repeat"] != 1.0 || m["timeout"] != 3600.0 {
		t.Errorf("POST /queue = %v", m)
	}
	id, _ := m["job_id"].(string)
	j := d.result(id)
	// Without cwd the job runs where the daemon runs, as the Python
	// server's jobs do (a user-mode daemon; see the system-mode test in
	// queued/cli for a shared one).
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if j.Cwd != wd || *j.ExitCode != 0 {
		t.Fatalf("job without cwd = %+v; want cwd %s", j, wd)
	}
	if out, _ := os.ReadFile(m["output_file"].(string)); string(out) != wd+"\n" {
		t.Errorf("output_file %v holds %q, want %q", m["output_file"], out, wd+"\n")
	}
	for _, body := range []string{`{"cmd":"true","mode":"reset"}`, `{"cmd":"true","mode":1}`} {
		if code, b := d.raw(http.MethodPost, "/queue", body, nil); code != http.StatusBadRequest || !strings.Contains(b, "mode") {
			t.Errorf("POST /queue %s = %d %s; want 400 naming mode", body, code, b)
		}
	}
}

// GET /job and GET /result answer the Python tool's keys beside ttkit's.
func TestPython_JobAndResultKeys(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	ok := d.result(d.object(http.MethodPost, "/queue", `{"cmd":"printf 'ok\\n'","repeat":3,"cwd":`+js(d.work)+`}`, 201)["job_id"].(string))
	for _, path := range []string{"/job/", "/result/"} {
		m := d.object(http.MethodGet, path+ok.ID, "", 200)
		has(t, path, m, "job_id", "status", "mode", "cmd", "cwd", "client_id", "timeout", "repeat", "repeat_current", "repeat_completed",
			"first_iteration_elapsed", "per_iter_estimate_sec", "submitted_at", "started_at", "finished_at", "output_file", "exit_code",
			"elapsed", "timed_out", "log_size", "log_truncated", "dropped_log_bytes", "error", "estimated_remaining_sec")
		if m["job_id"] != ok.ID || m["status"] != "done" || m["mode"] != "run" || m["exit_code"] != 0.0 || m["repeat_completed"] != 3.0 ||
			m["repeat_current"] != 3.0 || m["timed_out"] != false || m["log_size"] != 99.0 || m["error"] != nil ||
			m["output_file"] != filepath.Join(d.dir, "output", ok.ID+".log") {
			t.Errorf("%s of a finished job = %v", path, m)
		}
		if e, _ := m["elapsed"].(float64); e < 0 || e > 60 {
			t.Errorf("%s elapsed = %v", path, m["elapsed"])
		}
	}

	// A failure in the second iteration: one completed, as the Python
	// tool counts them.
	rep := d.object(http.MethodPost, "/queue", `{"cmd":"test -e mark || { touch mark; exit 0; }; exit 4","repeat":5,"cwd":`+js(d.work)+`}`, 201)
	m := d.object(http.MethodGet, "/result/"+d.result(rep["job_id"].(string)).ID, "", 200)
	if m["exit_code"] != 4.0 || m["repeat_completed"] != 1.0 || m["repeat_current"] != 2.0 {
		t.Errorf("result of a job whose second iteration failed = %v", m)
	}

	// A timeout.
	to := d.object(http.MethodPost, "/queue", `{"cmd":"sleep 30","timeout":1,"cwd":`+js(d.work)+`}`, 201)
	m = d.object(http.MethodGet, "/result/"+d.result(to["job_id"].(string)).ID, "", 200)
	if m["timed_out"] != true || m["exit_code"] != -9.0 || !strings.Contains(m["timeout_message"].(string), "timed out after 1s") {
		t.Errorf("result of a timed-out job = %v", m)
	}

	// Running: position and wait 0, running_sec, no elapsed yet.
	gate, release := d.gate()
	running := d.queue("1", gate)
	d.waitOutput(running.JobID, "started")
	m = d.object(http.MethodGet, "/job/"+running.JobID, "", 200)
	if m["status"] != "running" || m["position"] != 0.0 || m["estimated_wait_sec"] != 0.0 || m["elapsed"] != nil || m["running_sec"] == nil {
		t.Errorf("GET /job of a running job = %v", m)
	}
	queued := d.queue("1", "true")
	m = d.object(http.MethodGet, "/result/"+queued.JobID, "", 200)
	if m["status"] != "queued" || m["position"] != 1.0 || m["exit_code"] != nil {
		t.Errorf("GET /result of a queued job = %v", m)
	}
	release()
	d.result(queued.JobID)
}

// GET /logs answers JSON, as the Python tool does, unless the client asks
// for the raw bytes with Accept: application/octet-stream (ttkit's CLI and
// status page do).
func TestPython_LogsAnswerJSONUnlessRawIsAsked(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	j := d.result(d.queue("0", `printf 'h\303\251llo \377\n'`).JobID)
	m := d.object(http.MethodGet, "/logs/"+j.ID+"?offset=0&limit=4096", "", 200)
	has(t, "GET /logs", m, "job_id", "status", "output_file", "offset", "next_offset", "content", "truncated", "complete",
		"log_size", "log_truncated", "dropped_log_bytes")
	if m["content"] != "héllo \ufffd\n" || m["complete"] != true || m["truncated"] != false || m["next_offset"] != 9.0 ||
		m["log_size"] != 9.0 || m["status"] != "done" || m["job_id"] != j.ID {
		t.Errorf("GET /logs = %v", m)
	}
	m = d.object(http.MethodGet, "/logs/"+j.ID+"?offset=1&limit=2", "", 200)
	if m["content"] != "é" || m["complete"] != false || m["truncated"] != true || m["next_offset"] != 3.0 || m["offset"] != 1.0 {
		t.Errorf("GET /logs of a part = %v", m)
	}
	code, body := d.raw(http.MethodGet, "/logs/"+j.ID, "", map[string]string{"Accept": "application/octet-stream"})
	if code != 200 || body != "h\303\251llo \377\n" {
		t.Errorf("GET /logs, raw = %d %q", code, body)
	}
	// The Go client asks for the raw bytes.
	ch, err := d.client.Logs(d.ctx(), j.ID, api.LogsQuery{})
	if err != nil || string(ch.Data) != "h\303\251llo \377\n" || !ch.Done {
		t.Errorf("client.Logs = %+v %q, %v", ch, ch.Data, err)
	}
}

// GET /status keeps ttkit's cards and adds the Python tool's single-card
// keys for the default card, card 0.
func TestPython_StatusShowsTheDefaultCardAsThePythonTool(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	m := d.object(http.MethodGet, "/status", "", 200)
	has(t, "GET /status", m, "cards", "current", "pending", "recent", "device", "worker")
	dev, _ := m["device"].(map[string]any)
	has(t, "device", dev, "state", "reset_epoch", "reset_pending", "last_reset_at", "dead_since", "dead_reason", "queue_disabled", "disabled_reason")
	wk, _ := m["worker"].(map[string]any)
	has(t, "worker", wk, "alive", "heartbeat_age_sec", "degraded_reason", "maintenance_warning")
	if dev["state"] != "healthy" || dev["reset_epoch"] != 0.0 || dev["reset_pending"] != false || wk["alive"] != true ||
		wk["degraded_reason"] != nil || m["current"] != nil || len(m["pending"].([]any)) != 0 {
		t.Errorf("idle GET /status = %v", m)
	}

	done := d.result(d.object(http.MethodPost, "/queue", `{"cmd":"exit 3","client_id":"a","cwd":`+js(d.work)+`}`, 201)["job_id"].(string))
	gate, release := d.gate()
	running := d.object(http.MethodPost, "/queue", `{"cmd":`+js(gate)+`,"client_id":"a","cwd":`+js(d.work)+`}`, 201)["job_id"].(string)
	d.waitOutput(running, "started")
	waiting := d.object(http.MethodPost, "/queue", `{"cmd":"true","client_id":"b","cwd":`+js(d.work)+`}`, 201)["job_id"].(string)
	d.queue("1", "true") // card 1 is not the default card: not in these keys
	m = d.object(http.MethodGet, "/status", "", 200)
	cur, _ := m["current"].(map[string]any)
	has(t, "current", cur, "id", "cmd", "client", "running_sec", "estimated_remaining_sec", "repeat", "mode", "repeat_current", "repeat_completed")
	if cur["id"] != running || cur["client"] != "a" || cur["mode"] != "run" {
		t.Errorf("current = %v", cur)
	}
	pending, _ := m["pending"].([]any)
	if len(pending) != 1 {
		t.Fatalf("pending = %v", m["pending"])
	}
	p, _ := pending[0].(map[string]any)
	has(t, "pending", p, "id", "cmd", "client", "waiting_sec", "estimated_wait_sec", "estimated_run_sec", "repeat", "mode")
	if p["id"] != waiting || p["client"] != "b" {
		t.Errorf("pending = %v", p)
	}
	recent, _ := m["recent"].([]any)
	if len(recent) != 1 {
		t.Fatalf("recent = %v", m["recent"])
	}
	r, _ := recent[0].(map[string]any)
	has(t, "recent", r, "id", "cmd", "exit_code", "elapsed", "finished", "output_file", "repeat", "mode", "client",
		"repeat_completed", "per_iter_estimate_sec", "timed_out", "log_truncated")
	if r["id"] != done.ID || r["exit_code"] != 3.0 || r["client"] != "a" {
		t.Errorf("recent = %v", r)
	}
	release()
	d.result(waiting)
}

// POST /kill without a job id stops the caller's running job, as the
// Python tool stops the running one; with nothing running it answers 200
// {"error": "Nothing running"} as that tool does.
func TestPython_KillWithoutJobID(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	for _, body := range []string{`{}`, `{"job_id":""}`, ``, " \r\n\t"} {
		m := d.object(http.MethodPost, "/kill", body, 200)
		if m["error"] != "Nothing running" {
			t.Errorf("POST /kill %q with nothing running = %v", body, m)
		}
	}
	gate, release := d.gate()
	defer release()
	a := d.object(http.MethodPost, "/queue", `{"cmd":`+js(gate)+`,"client_id":"a","cwd":`+js(d.work)+`}`, 201)["job_id"].(string)
	d.waitOutput(a, "started")
	queued := d.queue("0", "true")
	m := d.object(http.MethodPost, "/kill", `{}`, 200)
	killed, _ := m["killed"].(map[string]any)
	if killed["id"] != a || killed["signal"] != "SIGINT" || killed["cmd"] != gate || m["job_id"] != a {
		t.Errorf("POST /kill {} = %v", m)
	}
	if j := d.result(a); j.Outcome != "killed" {
		t.Errorf("killed job = %+v", j)
	}
	// The queued job was not touched; it runs next.
	if j := d.result(queued.JobID); j.Outcome != "success" {
		t.Errorf("queued job after kill {} = %+v", j)
	}

	// Two running jobs: which one is ambiguous, unless the card or the
	// client id says.
	g0, r0 := d.gate()
	g1, r1 := d.gate()
	defer r0()
	defer r1()
	j0 := d.object(http.MethodPost, "/queue", `{"cmd":`+js(g0)+`,"client_id":"a","cwd":`+js(d.work)+`}`, 201)["job_id"].(string)
	j1 := d.object(http.MethodPost, "/queue", `{"cmd":`+js(g1)+`,"client_id":"b","device_id":"1","cwd":`+js(d.work)+`}`, 201)["job_id"].(string)
	d.waitOutput(j0, "started")
	d.waitOutput(j1, "started")
	code, body := d.raw(http.MethodPost, "/kill", `{}`, nil)
	if code != http.StatusConflict || !strings.Contains(body, j0) || !strings.Contains(body, j1) {
		t.Errorf("POST /kill {} with two running = %d %s; want 409 naming both", code, body)
	}
	m = d.object(http.MethodPost, "/kill", `{"device_id":"1"}`, 200)
	if m["killed"].(map[string]any)["id"] != j1 {
		t.Errorf("POST /kill on card 1 = %v", m)
	}
	d.result(j1)
	g1b, r1b := d.gate()
	defer r1b()
	j1b := d.object(http.MethodPost, "/queue", `{"cmd":`+js(g1b)+`,"client_id":"b","device_id":"1","cwd":`+js(d.work)+`}`, 201)["job_id"].(string)
	d.waitOutput(j1b, "started")
	m = d.object(http.MethodPost, "/kill", `{"client_id":"b"}`, 200)
	if m["killed"].(map[string]any)["id"] != j1b {
		t.Errorf("POST /kill {client_id: b} = %v", m)
	}
	// By id, a queued job: removed, no signal.
	q := d.queue("0", "true")
	m = d.object(http.MethodPost, "/kill", `{"job_id":"`+q.JobID+`"}`, 200)
	if k := m["killed"].(map[string]any); k["id"] != q.JobID || k["signal"] != nil {
		t.Errorf("POST /kill of a queued job = %v", m)
	}
}

// The Python tool posts /kill and /reset with no body, so an empty body
// is {}; but only JSON's own whitespace makes a body empty. A body of
// other Unicode spaces is not JSON and is refused, not read as {} (which
// on /reset means every card, on /hold card 0).
func TestPython_OnlyJSONWhitespaceIsAnEmptyBody(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	for _, path := range []string{"/kill", "/reset", "/hold", "/release", "/resubmit"} {
		for _, body := range []string{"\u0085", "\u00a0", "\u2028", "\u3000{}"} {
			if code, answer := d.raw(http.MethodPost, path, body, nil); code != http.StatusBadRequest || !strings.Contains(answer, "body") {
				t.Errorf("POST %s %q = %d %s; want 400 naming the body", path, body, code, answer)
			}
		}
	}
}

// POST /reset takes the Python test suite's client_id and answers the
// Python tool's action, device_state, reset_epoch and hint.
func TestPython_ResetAnswer(t *testing.T) {
	t.Parallel()
	ctl, _ := fakeControls(t)
	d := start(t, options{sched: func(o *scheduler.Options) { o.Controls = ctl }})
	ran := d.result(d.queue("0", "true").JobID)
	m := d.object(http.MethodPost, "/reset", `{"client_id":"tester"}`, 200)
	has(t, "POST /reset", m, "action", "device_state", "reset_epoch", "hint", "resets")
	if m["action"] != "scheduled" || m["reset_epoch"] != 0.0 || m["device_state"] != "healthy" {
		t.Errorf("POST /reset = %v", m)
	}
	for _, e := range m["resets"].([]any) {
		d.result(e.(map[string]any)["reset_job_id"].(string))
	}
	poll(t, "card 0's reset_epoch to be 1", func() bool {
		return d.object(http.MethodGet, "/status", "", 200)["device"].(map[string]any)["reset_epoch"] == 1.0
	})
	m = d.object(http.MethodPost, "/reset", `{"job_id":"`+ran.ID+`","client_id":"tester"}`, 200)
	if m["action"] != "already_reset" || m["reset_epoch"] != 1.0 {
		t.Errorf("POST /reset of a job run before the last reset = %v", m)
	}
	// A reset waiting behind a running job: a second request joins it.
	gate, release := d.gate()
	j := d.queue("0", gate)
	d.waitOutput(j.JobID, "started")
	first := d.object(http.MethodPost, "/reset", `{"device_id":"0","no_interrupt":true}`, 200)
	second := d.object(http.MethodPost, "/reset", `{"device_id":"0"}`, 200)
	if first["action"] != "scheduled" || second["action"] != "joined" {
		t.Errorf("two resets of a busy card: %v then %v", first, second)
	}
	release()
	d.result(first["resets"].([]any)[0].(map[string]any)["reset_job_id"].(string))
}
