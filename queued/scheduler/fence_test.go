package scheduler

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/ttkit/ttkit/internal/devacl"
	"github.com/ttkit/ttkit/internal/usertest"
	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/store"
)

// fenced starts a system-mode scheduler on cards 0 and 1 whose nodes are
// files in a directory every user may enter, 0600 root:root as the
// shipped udev rule leaves them, under TT_DEVICE_ENFORCE=acl.
func fenced(t *testing.T, tweak func(*Options)) (*bundle, *devacl.Enforcer) {
	t.Helper()
	usertest.RequireRoot(t)
	dir := filepath.Join(usertest.OpenDir(t), "tenstorrent")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"0", "1"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e := &devacl.Enforcer{Dir: dir}
	b := setup(t, func(o *Options) {
		o.Mode, o.Fence, o.GateOff = api.SystemMode, e, true
		if tweak != nil {
			tweak(o)
		}
	})
	return b, e
}

// canOpen opens path read-write as u, in a process of u's, and says
// whether the kernel let it; a refusal other than EACCES fails the test.
func canOpen(t *testing.T, u usertest.User, path string) bool {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", `exec 3<>"$1"`, "sh", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID}}
	out, err := cmd.CombinedOutput()
	if err != nil && !strings.Contains(string(out), "Permission denied") {
		t.Fatalf("open of %s as %s: %v: %s", path, u.Name, err, out)
	}
	return err == nil
}

// users is who holds a grant on card's node.
func users(t *testing.T, e *devacl.Enforcer, card int) []uint32 {
	t.Helper()
	st, err := e.State(card)
	if err != nil {
		t.Fatal(err)
	}
	return st.Users
}

// Issue 44: while a job runs, its user, and only its user, opens its
// cards (all of them, for a job of several); once it ends, nobody does.
func TestFence_RunningJobsUserAloneOpensItsCards(t *testing.T) {
	alice, mallory := usertest.New(t, "tfa"), usertest.New(t, "tfm")
	b, e := fenced(t, nil)
	gate, release := b.gate()
	uid := alice.UID
	// The job opens both its cards itself, as tt-metal would, before it
	// says it started: the grant comes before its process.
	cmd := fmt.Sprintf("exec 3<>%q 4<>%q && %s", e.Node(0), e.Node(1), gate)
	info, err := b.s.Submit(JobSpec{Cards: []int{0, 1}, DeviceSpec: "0-1", Cmd: cmd, Cwd: usertest.OpenDir(t), OwnerUID: &uid, Owner: alice.Name})
	if err != nil {
		t.Fatal(err)
	}
	b.waitOutput(info.ID, "started")
	for _, n := range []int{0, 1} {
		if got := users(t, e, n); !slices.Equal(got, []uint32{alice.UID}) {
			t.Fatalf("card %d grants %v while alice's job runs, want only %d", n, got, alice.UID)
		}
		if canOpen(t, mallory, e.Node(n)) {
			t.Fatalf("another user opened card %d of a running job", n)
		}
	}
	release()
	if done := b.waitDone(info.ID); done.Outcome != store.OutcomeSuccess {
		t.Fatalf("alice's job: %s %s: %s", done.Outcome, done.Error, output(t, b, info.ID))
	}
	for _, n := range []int{0, 1} {
		if got := users(t, e, n); len(got) != 0 {
			t.Fatalf("card %d keeps grants %v after the job ended", n, got)
		}
		if canOpen(t, alice, e.Node(n)) {
			t.Fatalf("alice opened card %d after her job ended", n)
		}
	}
}

// A hold grants its owner all its cards until it is released.
func TestFence_HoldGrantsItsCards(t *testing.T) {
	alice := usertest.New(t, "tfh")
	b, e := fenced(t, nil)
	uid := alice.UID
	h, err := b.s.Hold(HoldSpec{Cards: []int{0, 1}, DeviceSpec: "0-1", Reason: "slurm job 7", OwnerUID: &uid, Owner: alice.Name})
	if err != nil {
		t.Fatal(err)
	}
	poll(t, "the hold's grants", func() bool {
		return slices.Equal(users(t, e, 0), []uint32{uid}) && slices.Equal(users(t, e, 1), []uint32{uid})
	})
	if !canOpen(t, alice, e.Node(1)) {
		t.Fatal("the hold's user cannot open its card")
	}
	if _, err := b.s.Release(h.ID, "test"); err != nil {
		t.Fatal(err)
	}
	b.waitDone(h.ID)
	if len(users(t, e, 0)) != 0 || len(users(t, e, 1)) != 0 || canOpen(t, alice, e.Node(0)) {
		t.Fatal("the hold's grants outlived its release")
	}
}

// A grant left behind (queued was killed while a job ran) is gone before
// anything is dispatched after the restart.
func TestFence_StartRemovesStrayGrants(t *testing.T) {
	alice := usertest.New(t, "tfs")
	b, e := fenced(t, nil)
	b.s.Stop()
	if err := e.Grant([]int{0}, alice.UID); err != nil {
		t.Fatal(err)
	}
	b.start()
	if got := users(t, e, 0); len(got) != 0 {
		t.Fatalf("card 0 keeps the stray grant %v after the start", got)
	}
	if canOpen(t, alice, e.Node(0)) {
		t.Fatal("a stray grant survived the restart")
	}
}
