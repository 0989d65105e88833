package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/internal/usertest"
	"github.com/ttkit/ttkit/queued/api"
)

// The attack on import --system: mallory, who saw vera's queued
// job id in list --json, crafts a Python database whose row reuses it (a
// finished job of hers) and has root import it. Vera's job stays hers (her secret is still in it,
// mallory is refused it) and runs; mallory's row is a job of hers under a
// fresh id, whose legacy_id is the id it asked for.
func TestSystemMode_ImportNeverTakesOverAnotherUsersJob(t *testing.T) {
	vera, mallory := usertest.New(t, "ttiv"), usertest.New(t, "ttim")
	state := t.TempDir()
	s := startShared(t, "TT_DEVICE_LOG_DIR="+state)
	s.run(vera, "queue", "--device", "0", "--", "sleep 300").want(t, 0, nil, nil)
	r := s.run(vera, "queue", "--device", "0", "--env", "API_TOKEN=vera's secret", "--", "sleep 300")
	r.want(t, 0, nil, nil)
	victim := strings.TrimSpace(r.stdout)
	s.stop()

	tool := filepath.Join(mallory.Home, "tool")
	db := filepath.Join(tool, "jobs.sqlite3")
	if err := os.Mkdir(tool, 0o700); err != nil {
		t.Fatal(err)
	}
	kmdtest.MakeLegacyDB(t, map[string]any{"path": db, "rows": []map[string]any{
		{"id": victim, "cmd": "echo mine now", "cwd": mallory.Home, "mode": "run", "status": "done", "exit_code": 0,
			"submitted": hourAgo, "started_at": hourAgo, "finished_at": hourAgo + 1, "client_id": "mallory"},
	}})
	for _, p := range []string{tool, db} {
		if err := os.Chown(p, int(mallory.UID), int(mallory.GID)); err != nil {
			t.Fatal(err)
		}
	}
	imp := s.rootCommand("import", "--system", db)
	imp.Env = append(imp.Env, "TT_DEVICE_LOG_DIR="+state)
	r = runCmd(t, imp)
	r.want(t, 0, []string{"job " + victim + " is now ", "is another job's id here"}, nil)
	fresh, _, _ := strings.Cut(strings.SplitN(r.stdout, "job "+victim+" is now ", 2)[1], " ")

	s = startShared(t, "TT_DEVICE_LOG_DIR="+state)
	job := func(u usertest.User, id string) api.Job {
		t.Helper()
		r := s.run(u, "--json", "job", id)
		r.want(t, 0, nil, nil)
		var j api.Job
		if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
			t.Fatalf("%v: %s", err, r.stdout)
		}
		return j
	}
	// Vera's job is hers as she queued it, and runs (the job before it
	// was interrupted by the stop).
	deadline := time.Now().Add(60 * time.Second)
	for {
		j := job(vera, victim)
		if j.Owner != vera.Name || j.Env["API_TOKEN"] != "vera's secret" || j.Cmd != "sleep 300" || j.LegacyID != "" {
			t.Fatalf("vera's job after the import: %+v; want hers as she queued it", j)
		}
		if j.State == "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("vera's job did not start: %+v", j)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The id mallory's row asked for is vera's job's: every request of
	// mallory's by it (the Python tool's too: logs, result, kill) is
	// refused, and the job runs on.
	for _, args := range [][]string{{"job", victim}, {"logs", victim}, {"result", victim}, {"kill", victim}, {"resubmit", victim}} {
		s.run(mallory, args...).want(t, 1, nil, []string{"belongs to " + vera.Name})
	}
	if j := job(vera, victim); j.State != "running" {
		t.Fatalf("vera's job after mallory's requests: %+v", j)
	}
	if m := job(mallory, fresh); m.Owner != mallory.Name || m.LegacyID != victim || m.Cmd != "echo mine now" || m.State != "done" {
		t.Errorf("mallory's imported job: %+v; want hers, done, legacy_id %s", m, victim)
	}
	s.run(mallory, "job", fresh).want(t, 0, []string{"legacy id", victim}, nil)
	// A resubmit of the imported job is a new job of its owner's, not an
	// imported one: no legacy id, so no later import can claim it.
	r = s.run(mallory, "--json", "resubmit", fresh)
	r.want(t, 0, nil, nil)
	var q api.QueueResponse
	if err := json.Unmarshal([]byte(r.stdout), &q); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if c := job(mallory, q.JobID); c.Owner != mallory.Name || c.LegacyID != "" || c.Cmd != "echo mine now" {
		t.Errorf("the resubmitted copy: %+v; want mallory's, without a legacy id", c)
	}
	s.run(vera, "resubmit", fresh).want(t, 1, nil, []string{"belongs to " + mallory.Name})
}
