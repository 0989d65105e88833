package cli_test

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/internal/usertest"
	"github.com/ttkit/ttkit/queued/api"
)

// Never reset under someone else (docs/fitness.md, "A card held by
// someone else"), on the shared daemon: alice's reset of card 1 waits
// while bob's process, outside the queue, holds it, and `status` says so;
// alice may not force it; root's --force goes on, and the reset's log
// names who forced it and under which process.
func TestSystemMode_ResetWaitsForAnotherUsersProcess(t *testing.T) {
	alice, bob := usertest.New(t, "ttra"), usertest.New(t, "ttrb")
	root := usertest.User{Name: "root", Home: "/root"}
	tree := kmdtest.NewTree(t, filepath.Join(usertest.OpenDir(t), "tenstorrent"))
	tree.SetPids(0)
	tree.SetPids(1)
	s := startShared(t, "TT_DEVICE_RESET_CMD=echo reset", "TT_DEVICE_HEALTH_CHECK_CMD=true", "TT_DEVICE_DRIVER_PATH="+tree.Dir)
	p := exec.Command("sleep", "600")
	p.Dir = "/"
	p.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: bob.UID, Gid: bob.GID}}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Process.Kill(); p.Wait() })
	tree.SetPids(1, p.Process.Pid)

	var res api.ResetResponse
	decode(t, s.run(alice, "--json", "reset", "--device", "1"), &res)
	id := res.Resets[0].ResetJobID
	want := "recovery waiting: card 1 held by pid " + strconv.Itoa(p.Process.Pid) + " (" + bob.Name + ": sleep 600)"
	deadline := time.Now().Add(30 * time.Second)
	for r := s.run(alice, "status"); !strings.Contains(r.stdout, want); r = s.run(alice, "status") {
		if time.Now().After(deadline) {
			t.Fatalf("status never says %q: %v", want, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.run(alice, "reset", "--device", "1", "--force").want(t, 1, nil, []string{"only", "may force"})
	s.run(root, "reset", "--device", "1", "--force").want(t, 0, []string{"this request joined it"}, nil)
	for {
		var j api.Job
		decode(t, s.run(root, "--json", "job", id), &j)
		if j.State == "done" {
			if j.ExitCode == nil || *j.ExitCode != 0 {
				t.Fatalf("the forced reset: %+v", j)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the forced reset is %s", j.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.run(root, "logs", id).want(t, 0, []string{"== " + want,
		"== forced by root: the recovery goes on under pid " + strconv.Itoa(p.Process.Pid) + " (" + bob.Name + ": sleep 600)"}, nil)
}
