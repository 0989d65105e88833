package cli_test

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
)

// TestJSON_RunAndLogsFollow: run --json prints one JSON event per line
// (queued, started, output, done with the record) and exits with the
// job's status; logs -f --json ends with a line carrying the record, and
// logs -f without --json ends with the status line and the job's status.
func TestJSON_RunAndLogsFollow(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	r := d.run("--json", "run", "--", "echo one; echo two; exit 3")
	if r.code != 3 {
		t.Fatalf("run --json: %v", r)
	}
	var events []map[string]any
	var out strings.Builder
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		var e map[string]any
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("run --json printed a line that is not JSON: %q", sc.Text())
		}
		events = append(events, e)
		if e["event"] == "output" {
			out.WriteString(e["data"].(string))
		}
	}
	if len(events) < 4 || events[0]["event"] != "queued" || events[1]["event"] != "started" || events[len(events)-1]["event"] != "done" {
		t.Fatalf("run --json events: %v", events)
	}
	job := events[len(events)-1]["job"].(map[string]any)
	if out.String() != "one\ntwo\n" || job["exit_code"].(float64) != 3 || job["outcome"] != "failure" {
		t.Fatalf("run --json output %q, job %v", out.String(), job)
	}
	id := events[0]["job_id"].(string)

	f := d.run("--json", "logs", "-f", id)
	if f.code != 3 {
		t.Fatalf("logs -f --json: %v", f)
	}
	lines := strings.Split(strings.TrimSpace(f.stdout), "\n")
	var last struct {
		Done bool            `json:"done"`
		Job  *map[string]any `json:"job"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || !last.Done || last.Job == nil {
		t.Fatalf("logs -f --json last line %q: %v", lines[len(lines)-1], err)
	}
	d.run("logs", "-f", id).want(t, 3, []string{"one\ntwo\n"}, []string{"job " + id + " failed: exit code 3"})
	ok := strings.TrimSpace(d.run("queue", "--", "echo fine").stdout)
	d.run("logs", "-f", ok).want(t, 0, []string{"fine\n"}, []string{"job " + ok + " succeeded: exit code 0"})
}
