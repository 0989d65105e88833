package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/scheduler"
)

// fakeControls writes a reset and a health check script that record
// their arguments in dir/calls and fail while dir/fail-<name> exists.
func fakeControls(t *testing.T) (scheduler.Controls, string) {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"reset", "health"} {
		script := fmt.Sprintf("#!/bin/sh\necho \"%[1]s $*\" >> %[2]q/calls\necho %[1]s ran\n[ ! -e %[2]q/fail-%[1]s ]\n", name, dir)
		if err := os.WriteFile(filepath.Join(dir, name+".sh"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return scheduler.Controls{Reset: filepath.Join(dir, "reset.sh"), HealthCheck: filepath.Join(dir, "health.sh") + " {device}", Dir: dir}, dir
}

func (d *daemon) reset(req api.ResetRequest) api.ResetResponse {
	d.t.Helper()
	r, err := d.client.Reset(d.ctx(), req)
	if err != nil {
		d.t.Fatal(err)
	}
	return r
}

func (d *daemon) card(id string) api.CardStatus {
	d.t.Helper()
	st, err := d.client.Status(d.ctx())
	if err != nil {
		d.t.Fatal(err)
	}
	for _, c := range st.Cards {
		if c.DeviceID == id {
			return c
		}
	}
	d.t.Fatalf("no card %s in status", id)
	return api.CardStatus{}
}

func TestAPI_Reset(t *testing.T) {
	t.Parallel()
	ctl, dir := fakeControls(t)
	d := start(t, options{sched: func(o *scheduler.Options) { o.Controls = ctl }})

	// By card, as a string: interrupts the running job.
	gate, _ := d.gate()
	victim := d.queue("0", gate)
	d.waitOutput(victim.JobID, "started")
	r := d.reset(api.ResetRequest{DeviceID: "0"})
	if len(r.Resets) != 1 || r.Resets[0].DeviceID != "0" || r.Resets[0].ResetJobID == "" || r.Resets[0].InterruptedJobID != victim.JobID {
		t.Fatalf("reset response = %+v", r)
	}
	first := r.Resets[0].ResetJobID
	rj := d.result(first)
	if rj.Kind != "reset" || rj.Outcome != "success" || rj.DeviceID != "0" {
		t.Fatalf("reset job = %+v", rj)
	}
	if v := d.result(victim.JobID); *v.ExitCode != -1 || v.Outcome != "interrupted" || !strings.Contains(v.Error, "reset") {
		t.Fatalf("interrupted job = %+v", v)
	}
	logs, err := d.client.Logs(d.ctx(), first, api.LogsQuery{})
	if err != nil || !strings.Contains(string(logs.Data), "== reset: "+ctl.Reset+" 0\nreset ran\n") || !logs.Done {
		t.Fatalf("reset logs = %q, %v", logs.Data, err)
	}
	c := d.card("0")
	if c.State != "healthy" || c.LastReset == nil || c.LastReset.JobID != first || c.LastReset.Result != "ok" || c.Reset != nil {
		t.Fatalf("card 0 = %+v", c)
	}

	// By job id prefix: skipped, the card was reset since.
	r = d.reset(api.ResetRequest{JobID: victim.JobID[:8]})
	if e := r.Resets[0]; !e.Skipped || e.ResetJobID != "" || !strings.Contains(e.Reason, "card 0 was reset since job "+victim.JobID) {
		t.Fatalf("job-based reset = %+v", r)
	}

	// Every card, with device_id as a JSON integer for one of them first.
	code, body := d.raw(http.MethodPost, "/reset", `{"device_id": 1}`, nil)
	var one api.ResetResponse
	if code != http.StatusOK || json.Unmarshal([]byte(body), &one) != nil || one.Resets[0].DeviceID != "1" {
		t.Fatalf("reset with an integer device_id: %d %s", code, body)
	}
	d.result(one.Resets[0].ResetJobID)
	all := d.reset(api.ResetRequest{})
	if len(all.Resets) != 2 || all.Resets[0].DeviceID != "0" || all.Resets[1].DeviceID != "1" {
		t.Fatalf("all-cards reset = %+v", all)
	}
	for _, e := range all.Resets {
		d.result(e.ResetJobID)
	}

	// A failing health check kills card 1 only.
	if err := os.WriteFile(filepath.Join(dir, "fail-health"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dead := d.result(d.reset(api.ResetRequest{DeviceID: "1"}).Resets[0].ResetJobID)
	if dead.Outcome != "failure" || !strings.Contains(dead.Error, "card 1 is dead") {
		t.Fatalf("failed reset = %+v", dead)
	}
	_, err = d.client.Queue(d.ctx(), api.QueueRequest{Cmd: "true", Cwd: d.work, DeviceID: "1"})
	if !api.IsStatus(err, http.StatusServiceUnavailable) || !strings.Contains(err.Error(), "card 1 is dead") {
		t.Fatalf("submit to dead card: %v", err)
	}
	c1 := d.card("1")
	if c1.State != "dead" || c1.DeadSince == nil || !strings.Contains(c1.DeadReason, "health check exited 1") ||
		c1.Worker != "paused: card dead" || c1.PausedReason != "card dead" || c1.LastReset.Result != "failed" {
		t.Fatalf("card 1 = %+v", c1)
	}
	if j := d.result(d.queue("0", "true").JobID); *j.ExitCode != 0 {
		t.Fatalf("card 0 job = %+v", j)
	}

	// Bad requests name the field.
	for _, tc := range []struct {
		body string
		code int
		want string
	}{
		{`{"device_id": "0", "job_id": "` + victim.JobID + `"}`, 400, "job_id: give device_id or job_id, not both"},
		{`{"device_id": "9"}`, 400, "device_id: no card 9"},
		{`{"device_id": true}`, 400, "device_id: want a card number"},
		{`{"job_id": "zz"}`, 400, "job_id:"},
		{`{"job_id": "abcdef0123"}`, 404, "no such job"},
		{`{"no_interrupt": "yes"}`, 400, "no_interrupt: want true or false"},
		{`{"frobnicate": true}`, 400, "frobnicate: unknown field"},
	} {
		code, body := d.raw(http.MethodPost, "/reset", tc.body, nil)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("POST /reset %s = %d %s; want %d with %q", tc.body, code, body, tc.code, tc.want)
		}
	}
	if code, _ := d.raw(http.MethodGet, "/reset", "", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /reset = %d", code)
	}
}

func TestAPI_ResetWithoutControlsIs503(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	_, err := d.client.Reset(d.ctx(), api.ResetRequest{})
	if !api.IsStatus(err, http.StatusServiceUnavailable) || !strings.Contains(err.Error(), "TT_DEVICE_RESET_CMD") {
		t.Fatalf("reset without controls: %v", err)
	}
}

func TestAPI_StatusShowsForeignHolders(t *testing.T) {
	t.Parallel()
	tree := kmdtest.NewTree(t, filepath.Join(t.TempDir(), "tenstorrent"))
	outsider := kmdtest.Start(t, t.TempDir(), nil, "sleep", "600")
	tree.SetPids(0)
	tree.SetPids(1, outsider.PID())
	d := start(t, options{sched: func(o *scheduler.Options) { o.DriverPath = tree.Dir; o.WaitForeign = true }})
	c := d.card("1")
	if len(c.Foreign) != 1 || c.Foreign[0] != (api.Holder{PID: outsider.PID(), FriendlyName: "sleep", CommandLine: "sleep 600"}) || !c.ForeignWait {
		t.Fatalf("card 1 = %+v", c)
	}
	if c := d.card("0"); len(c.Foreign) != 0 {
		t.Fatalf("card 0 foreign = %+v", c.Foreign)
	}
	q := d.queue("1", "true")
	want := fmt.Sprintf("foreign holder pid %d (sleep)", outsider.PID())
	poll(t, "card 1 to pause", func() bool { return d.card("1").PausedReason == want })
	outsider.Stop()
	tree.SetPids(1)
	if j := d.result(q.JobID); *j.ExitCode != 0 {
		t.Fatalf("job = %+v", j)
	}
}
