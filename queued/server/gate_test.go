package server

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/scheduler"
)

// probeCount is how many times the fake site probe ran on card.
func probeCount(t *testing.T, dir, card string) int {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(dir, "probes"))
	return strings.Count(string(b), "probe "+card+"\n")
}

// POST /gate runs the gate now: the site probe every time (only when due
// with probe_if_due), never under a running job; bad bodies name the
// field.
func TestAPI_Gate(t *testing.T) {
	t.Parallel()
	ctl, dir := fakeControls(t)
	probe := filepath.Join(dir, "probe.sh")
	if err := os.WriteFile(probe, []byte("#!/bin/sh\necho \"probe $1\" >> "+filepath.Join(dir, "probes")+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	d := start(t, options{sched: func(o *scheduler.Options) {
		o.Controls, o.GateCmd, o.GateTimeout, o.GateInterval = ctl, probe+" {device}", 30*time.Second, time.Second
	}})
	gate := func(body string) api.GateResponse {
		t.Helper()
		code, out := d.raw(http.MethodPost, "/gate", body, nil)
		var r api.GateResponse
		if code != http.StatusOK || json.Unmarshal([]byte(out), &r) != nil {
			t.Fatalf("POST /gate %s = %d %s", body, code, out)
		}
		return r
	}
	// The probe runs on every card at start: wait for it.
	for deadline := time.Now().Add(30 * time.Second); probeCount(t, dir, "0") == 0 || probeCount(t, dir, "1") == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no probe at start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := probeCount(t, dir, "0")
	r := gate(`{"device_id": "0"}`)
	if c := r.Cards[0]; len(r.Cards) != 1 || c.DeviceID != "0" || !c.Fit || c.State != "healthy" || c.Probe != "passed" || c.Reason != "" {
		t.Fatalf("gate of a fit card = %+v", r)
	}
	if n := probeCount(t, dir, "0"); n != before+1 {
		t.Errorf("the probe ran %d times for one gate", n-before)
	}
	if r = gate(`{"device_id": 0, "probe_if_due": true}`); r.Cards[0].Probe != "not due" || !r.Cards[0].Fit {
		t.Errorf("gate with probe_if_due right after a probe = %+v", r)
	}

	open, release := d.gate()
	job := d.queue("1", open)
	d.waitOutput(job.JobID, "started")
	before = probeCount(t, dir, "1")
	r = gate(`{"device_id": "0,1"}`)
	if len(r.Cards) != 2 || r.Cards[1].Probe != "not run: card 1 runs job "+job.JobID || !r.Cards[1].Fit {
		t.Errorf("gate of a card running a job = %+v", r)
	}
	if n := probeCount(t, dir, "1"); n != before {
		t.Errorf("the probe ran under a running job")
	}
	release()
	d.result(job.JobID)

	for _, tc := range []struct {
		body string
		code int
		want string
	}{
		{`{}`, 400, "device_id: required"},
		{`{"device_id": "9"}`, 400, "device_id: no card 9"},
		{`{"device_id": "0", "probe_if_due": "yes"}`, 400, "probe_if_due: want true or false"},
		{`{"device_id": "0", "frobnicate": 1}`, 400, "frobnicate: unknown field"},
	} {
		if code, body := d.raw(http.MethodPost, "/gate", tc.body, nil); code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("POST /gate %s = %d %s; want %d with %q", tc.body, code, body, tc.code, tc.want)
		}
	}
	if code, _ := d.raw(http.MethodGet, "/gate", "", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /gate = %d", code)
	}
}

// On a shared daemon only admins gate a card: the probe runs as the
// reset user, and an unfit verdict holds every user's jobs on the card.
func TestAPI_GateIsForAdmins(t *testing.T) {
	t.Parallel()
	s := startShared(t, nil)
	if code, body := s.ask(flooder, http.MethodPost, "/gate", `{"device_id":"0"}`, 30*time.Second); code != http.StatusForbidden ||
		!strings.Contains(body, "only root") {
		t.Errorf("a user's POST /gate = %d %s", code, body)
	}
	if code, body := s.ask(0, http.MethodPost, "/gate", `{"device_id":"0"}`, 30*time.Second); code != http.StatusOK || !strings.Contains(body, `"fit":true`) {
		t.Errorf("root's POST /gate = %d %s", code, body)
	}
}
