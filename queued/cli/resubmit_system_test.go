package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/internal/usertest"
	"github.com/ttkit/ttkit/queued/api"
)

// An admin's resubmit of a user's job runs as that user: the job's
// environment (here a BASH_ENV that writes who runs it) never runs with
// the admin's identity. A user may resubmit their own job, not another's.
func TestSystemMode_AdminResubmitRunsAsTheOwner(t *testing.T) {
	alice, bob := usertest.New(t, "ttqa"), usertest.New(t, "ttqb")
	s := startShared(t)
	trap := filepath.Join(alice.Home, "env.sh")
	seen := filepath.Join(usertest.OpenDir(t), "ran-as")
	if err := os.WriteFile(trap, []byte("id -u >> "+seen+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(seen), 0o777)
	r := s.run(alice, "queue", "--device", "0", "--env", "BASH_ENV="+trap, "--", "echo harmless")
	r.want(t, 0, nil, nil)
	job := strings.TrimSpace(r.stdout)
	s.run(alice, "wait", job).want(t, 0, nil, nil)

	out, err := s.rootCommand("--json", "resubmit", job).Output()
	if err != nil {
		t.Fatalf("root's resubmit: %v: %s", err, out)
	}
	var q api.QueueResponse
	if err := json.Unmarshal(out, &q); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	s.run(alice, "wait", q.JobID).want(t, 0, nil, nil)
	got, _ := os.ReadFile(seen)
	want := strings.Repeat(strconv.Itoa(int(alice.UID))+"\n", 2)
	if string(got) != want {
		t.Errorf("the job's BASH_ENV ran as uids %q, want alice (%d) both times: root's resubmit ran alice's environment as root", got, alice.UID)
	}
	s.run(alice, "job", q.JobID).want(t, 0, []string{"owner      " + alice.Name}, nil)
	// Bob may neither see nor copy alice's job.
	s.run(bob, "resubmit", job).want(t, 1, nil, []string{"belongs to " + alice.Name})
}
