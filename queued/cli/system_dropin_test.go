package cli_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/usertest"
)

// On a shared queued, kill without an id stops the caller's own running
// job; another user's is named, not stopped.
func TestSystemMode_KillWithoutIDIsYourOwnJob(t *testing.T) {
	alice, bob := usertest.New(t, "ttqk"), usertest.New(t, "ttql")
	s := startShared(t)
	gate := filepath.Join(usertest.OpenDir(t), "go")
	r := s.run(alice, "queue", "--device", "0", "--", "while [ ! -e "+gate+" ]; do sleep 0.05; done")
	r.want(t, 0, nil, nil)
	id := strings.TrimSpace(r.stdout)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(s.run(alice, "job", id).stdout, "running") {
		if time.Now().After(deadline) {
			t.Fatalf("alice's job %s did not start", id)
		}
	}
	s.run(bob, "kill").want(t, 1, nil, []string{"no running job of yours", id[:8], alice.Name})
	s.run(alice, "kill").want(t, 0, []string{"stopping job " + id}, nil)
	// SIGINT, or SIGKILL after the grace if the loop outlives it.
	if r := s.run(alice, "result", id); (r.code != 130 && r.code != 137) || !strings.Contains(r.stderr, "was killed") {
		t.Errorf("alice's job after her kill: %v", r)
	}
}

// A request without cwd runs in the caller's home directory on a shared
// queued, never in the root daemon's own directory.
func TestSystemMode_QueueWithoutCwdRunsInTheCallersHome(t *testing.T) {
	alice := usertest.New(t, "ttqh")
	s := startShared(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	client := filepath.Join(usertest.OpenDir(t), "client")
	if err := os.WriteFile(client, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(client)
	cmd.Dir = "/"
	cmd.Env = []string{postSocketEnv + "=" + s.sock, "TTQ_TEST_POST_PATH=/queue", `TTQ_TEST_POST_BODY={"cmd":"pwd","mode":"run"}`}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: alice.UID, Gid: alice.GID}}
	r := runCmd(t, cmd)
	code, body, _ := strings.Cut(r.stdout, "\n")
	var q struct {
		JobID string `json:"job_id"`
	}
	if r.code != 0 || code != "201" || json.Unmarshal([]byte(body), &q) != nil {
		t.Fatalf("alice's POST /queue without cwd: %v", r)
	}
	s.run(alice, "result", q.JobID).want(t, 0, []string{alice.Home + "\n"}, nil)
	s.run(alice, "job", q.JobID).want(t, 0, []string{"cwd        " + alice.Home + "\n"}, nil)
}
