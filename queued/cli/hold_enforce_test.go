package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/usertest"
)

// Issue 44, Slurm: the Prolog (root) takes the hold for the Slurm job's
// user (--for-uid $SLURM_JOB_UID); under TT_DEVICE_ENFORCE=acl that user
// alone opens the held cards, all of them, until the Epilog releases it.
// Only admins may take a hold for someone else.
func TestSystemMode_EnforcedSlurmHoldGrantsTheJobsUser(t *testing.T) {
	alice, mallory := usertest.New(t, "ttfa"), usertest.New(t, "ttfm")
	root := usertest.User{Name: "root", Home: "/root"}
	dev := filepath.Join(usertest.OpenDir(t), "tenstorrent")
	os.Mkdir(dev, 0o755)
	for _, n := range []string{"0", "1"} {
		if err := os.WriteFile(filepath.Join(dev, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := startShared(t, "TT_DEVICE_ENFORCE=acl", "TT_DEVICE_DEV_DIR="+dev)
	uid := strconv.FormatUint(uint64(alice.UID), 10)

	s.run(mallory, "hold", "--device", "0", "--for-uid", uid).want(t, 1, nil, []string{"for_uid", "only admins"})
	r := s.run(root, "hold", "--device", "0,1", "--slurm-job", "4250", "--for-uid", uid, "--wait=30s")
	r.want(t, 0, nil, nil)
	s.run(alice, "hold-status", strings.TrimSpace(r.stdout)).want(t, 0, []string{"active"}, nil)
	for _, n := range []string{"0", "1"} {
		node := filepath.Join(dev, n)
		if !opensWithin(t, alice, node, true) {
			t.Fatalf("the Slurm job's user cannot open held card %s", n)
		}
		if opensWithin(t, mallory, node, false) {
			t.Fatalf("another user opened held card %s", n)
		}
	}
	s.run(root, "release", "--slurm-job", "4250").want(t, 0, nil, nil)
	if opensWithin(t, alice, filepath.Join(dev, "0"), false) {
		t.Fatal("the Slurm job's user still opens the card after the Epilog's release")
	}
}

// opensWithin reports whether u's own process opens path read-write,
// looking again for up to 30 s until the answer is want (a grant or its
// revocation follows the hold's state by a moment).
func opensWithin(t *testing.T, u usertest.User, path string, want bool) bool {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cmd := exec.Command("/bin/sh", "-c", `exec 3<>"$1"`, "sh", path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID}}
		out, err := cmd.CombinedOutput()
		if err != nil && !strings.Contains(string(out), "Permission denied") {
			t.Fatalf("open of %s as %s: %v: %s", path, u.Name, err, out)
		}
		if got := err == nil; got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond) // polling: a grant has no event to wait on
	}
}
