package cli_test

import (
	"strings"
	"testing"

	"github.com/ttkit/ttkit/internal/usertest"
)

// Holds on the shared daemon, as a hostile or merely curious user meets
// them. A Slurm Prolog (root) takes the hold and the job's TaskProlog,
// running as the job's user, waits on it: the hold's record is everyone's
// to read, as a reset's is, since it is about the card. Releasing it or
// forcing a reset through it is its owner's and the admins' only. A user's
// own hold ends by itself no later than a job of theirs could run: a user
// cannot hold a card forever.
func TestSystemMode_Holds(t *testing.T) {
	alice := usertest.New(t, "ttha")
	root := usertest.User{Name: "root", Home: "/root"}
	s := startShared(t, "TT_DEVICE_MAX_TIMEOUT=3600")

	r := s.run(root, "hold", "--device", "0", "--reason", "slurm job 4242", "--slurm-job", "4242")
	r.want(t, 0, nil, nil)
	hold := strings.TrimSpace(r.stdout)

	s.run(alice, "hold-status", hold).want(t, 0, []string{"hold " + hold, "active", "slurm job 4242"}, nil)
	s.run(alice, "hold-status", "--slurm-job", "4242", "--wait=10s").want(t, 0, []string{"active"}, nil)
	s.run(alice, "release", hold).want(t, 1, nil, []string{"belongs to root"})
	s.run(alice, "release", "--slurm-job", "4242").want(t, 0, []string{"no live hold"}, nil)
	s.run(alice, "reset", "--device", "0", "--force").want(t, 1, nil, []string{"only", "may force"})
	s.run(alice, "hold-status", hold).want(t, 0, []string{"active"}, nil)

	// Only admins tie a hold to a Slurm job: root's Epilog trusts such a
	// hold's cards when its Prolog's record is lost.
	s.run(alice, "hold", "--device", "0,1", "--slurm-job", "4243").want(t, 1, nil, []string{"slurm_job_id", "only admins", "Slurm Prolog"})
	s.run(alice, "hold-status", "--slurm-job", "4243").want(t, 1, nil, []string{"no hold for Slurm job 4243"})

	// Alice's own hold: bounded by the longest timeout, refused beyond it.
	s.run(alice, "hold", "--device", "1", "--expires", "2h").want(t, 1, nil, []string{"expires_sec", "7200 is above 3600", "admins"})
	r = s.run(alice, "--json", "hold-status", strings.TrimSpace(s.run(alice, "hold", "--device", "1").stdout))
	r.want(t, 0, []string{`"expires_at"`, `"state":"active"`}, nil)
	mine := strings.TrimSpace(s.run(alice, "list", "--mine", "--json").stdout)
	if !strings.Contains(mine, `"kind":"hold"`) {
		t.Errorf("alice's list does not show her hold: %s", mine)
	}
	s.run(root, "release", hold).want(t, 0, []string{"released hold " + hold}, nil)
}
