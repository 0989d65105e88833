package cli_test

import (
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/api"
)

// TestQueueJobResultLogsKill walks a job through every read command, by
// prefix, in both output forms.
func TestQueueJobResultLogsKill(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)

	r := d.runWith([]string{"TT_QUEUE_CLIENT_ID=alice"}, "", "queue", "--device", "1", "-e", "GREETING=hello", "--", `echo "$GREETING from $TT_QUEUE_DEVICE"; echo second line; exit 4`)
	r.want(t, 0, nil, []string{"queued on card 1 at position"})
	id := strings.TrimSpace(r.stdout)
	if !jobIDRe.MatchString(id) || id != jobIDRe.FindString(r.stdout) {
		t.Fatalf("queue printed %q, want the job id alone", r.stdout)
	}
	prefix := id[:6]

	res := d.run("result", prefix)
	res.want(t, 4, nil, []string{"failed: exit code 4"})
	if res.stdout != "hello from 1\nsecond line\n" {
		t.Fatalf("result stdout = %q", res.stdout)
	}

	// The record's keys at the top too, as the Python tool prints them.
	type record api.Job
	var rj struct {
		record
		Job             api.Job `json:"job"`
		Output          string  `json:"output"`
		OutputOffset    int64   `json:"output_offset"`
		OutputCut       bool    `json:"output_cut"`
		OutputTruncated bool    `json:"output_truncated"`
	}
	res = d.run("--json", "result", prefix)
	if res.code != 4 || res.stderr != "" {
		t.Fatalf("result --json: %v", res)
	}
	decode(t, res, &rj)
	if rj.Job.ID != id || rj.Output != "hello from 1\nsecond line\n" || rj.OutputCut || *rj.Job.ExitCode != 4 || rj.Job.ClientID != "alice" ||
		rj.record.ID != id || rj.record.Status != "done" || rj.OutputTruncated {
		t.Fatalf("result --json = %+v", rj)
	}

	job := d.run("job", prefix)
	job.want(t, 0, []string{id, "card       1", "done, failed: exit code 4", "GREETING=hello", "client     alice"}, nil)
	if j := d.job(prefix); j.ID != id || j.Env["GREETING"] != "hello" || j.State != "done" {
		t.Fatalf("job --json = %+v", j)
	}

	logs := d.run("logs", prefix, "--offset", "6", "--limit", "4")
	logs.want(t, 0, nil, nil)
	if logs.stdout != "from" {
		t.Fatalf("logs --offset 6 --limit 4 = %q", logs.stdout)
	}
	d.run("logs", id).want(t, 0, []string{"hello from 1\nsecond line\n"}, nil)
	var lj struct {
		JobID      string `json:"job_id"`
		Offset     int64  `json:"offset"`
		NextOffset int64  `json:"next_offset"`
		Size       int64  `json:"size"`
		State      string `json:"state"`
		Done       bool   `json:"done"`
		Data       string `json:"data"`
	}
	logs = d.run("--json", "logs", prefix, "--offset", "6")
	decode(t, logs, &lj)
	if lj.Data != "from 1\nsecond line\n" || lj.Offset != 6 || lj.NextOffset != 25 || lj.Size != 25 || !lj.Done || lj.State != "done" {
		t.Fatalf("logs --json = %+v", lj)
	}

	var qr api.QueueResponse
	g := newGate(t)
	defer g.open(t)
	running := d.run("--json", "queue", "--", "echo running; "+g.wait())
	decode(t, running, &qr)
	if !jobIDRe.MatchString(qr.JobID) || qr.DeviceID != "0" || qr.Position != 1 || running.stderr != "" {
		t.Fatalf("queue --json = %+v (%v)", qr, running)
	}
	queued := d.run("queue", "--", "echo never")
	queuedID := strings.TrimSpace(queued.stdout)
	d.waitState(qr.JobID, "running")

	st := d.run("status")
	st.want(t, 0, []string{"CARD", "STATE", "EST. WAIT", "LAST RESET", "FOREIGN", qr.JobID[:8] + " echo running", "healthy"}, nil)
	if strings.Contains(st.stdout, "\x1b[") {
		t.Fatalf("status coloured output that is not a terminal:\n%s", st.stdout)
	}
	var status api.Status
	decode(t, d.run("--json", "status"), &status)
	if len(status.Cards) != 2 || status.Cards[0].Current == nil || status.Cards[0].Current.ID != qr.JobID ||
		len(status.Cards[0].Pending) != 1 || status.Cards[0].Pending[0].ID != queuedID {
		t.Fatalf("status --json = %+v", status)
	}

	// logs --follow streams until the job ends.
	follow := make(chan result, 1)
	go func() { follow <- d.run("logs", "--follow", qr.JobID[:7]) }()

	var killed api.Job
	decode(t, d.run("--json", "kill", queuedID[:8]), &killed)
	if killed.ID != queuedID || killed.State != "done" || killed.Outcome != "killed" {
		t.Fatalf("kill --json of a queued job = %+v", killed)
	}
	d.run("kill", qr.JobID[:6]).want(t, 0, []string{"stopping job " + qr.JobID, "SIGINT"}, []string{"result " + qr.JobID})
	f := <-follow
	f.want(t, 128+2, []string{"running\n"}, []string{"was killed: exit code -2"})
	d.run("result", qr.JobID).want(t, 128+2, nil, []string{"was killed: exit code -2 (status 130)"})
	d.run("kill", qr.JobID).want(t, 1, nil, []string{"queued refused the request", "already finished"})
}

func TestResult_CutsLongOutputAndNoWait(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := strings.TrimSpace(d.run("queue", "--", "seq 1 1000").stdout)
	r := d.runWith([]string{"TT_DEVICE_RESULT_BYTES=9"}, "", "result", id)
	r.want(t, 0, nil, []string{"output cut: printed the last 9 of 3893 bytes", "logs " + id})
	if r.stdout != "999\n1000\n" {
		t.Fatalf("result printed %q, want the last 9 bytes", r.stdout)
	}
	if r := d.run("result", "--max-bytes", "4", id); r.code != 0 || r.stdout != "000\n" || !strings.Contains(r.stderr, "last 4 of") {
		t.Fatalf("result --max-bytes 4: %v", r)
	}

	g := newGate(t)
	defer g.open(t)
	slow := strings.TrimSpace(d.run("queue", "--", g.wait()).stdout)
	d.run("result", "--no-wait", slow).want(t, 124, nil, []string{"has not ended", "kill " + slow})
	d.run("result", "--wait-timeout", "0.2", slow).want(t, 124, nil, []string{"stopped waiting after 200ms", "was not stopped"})
	g.open(t)
	d.run("result", slow).want(t, 0, nil, nil)
}

func TestReset(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	var res api.ResetResponse
	decode(t, d.run("--json", "reset", "--device", "1"), &res)
	if len(res.Resets) != 1 || res.Resets[0].DeviceID != "1" || res.Resets[0].ResetJobID == "" {
		t.Fatalf("reset --json --device 1 = %+v", res)
	}
	d.run("result", res.Resets[0].ResetJobID).want(t, 0, nil, nil)
	d.run("reset").want(t, 0, []string{"card 0: reset ", "card 1: "}, []string{"status"})
	d.run("reset", "--device", "0", "0123456789").want(t, 2, nil, []string{"not both"})
	id := strings.TrimSpace(d.run("queue", "--", "true").stdout)
	d.run("result", id).want(t, 0, nil, nil)
	d.run("reset", id[:6]).want(t, 0, []string{"card 0: "}, nil)
	d.run("reset", "--device", "9").want(t, 1, nil, []string{"queued refused the request"})
}
