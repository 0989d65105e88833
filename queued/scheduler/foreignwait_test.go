package scheduler

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
)

// Never reset under someone else (docs/fitness.md, "A card held by
// someone else"): a recovery waits while a process outside the queue
// holds the card, says so, and goes on once the process is gone.

// setupForeign is setupLadder with a fake KMD tree whose pids files list
// the holders of cards 0 and 1, rescanned every 10 ms.
func setupForeign(t *testing.T) (*bundle, *controls, *fakeCards, *kmdtest.Tree) {
	t.Helper()
	tree := kmdtest.NewTree(t, filepath.Join(t.TempDir(), "tenstorrent"))
	tree.SetPids(0)
	tree.SetPids(1)
	b, ctl, cards := setupLadder(t, 0, func(o *Options) {
		o.DriverPath = tree.Dir
		o.HolderMaxAge = time.Nanosecond
		o.ForeignRecheck = 10 * time.Millisecond
	})
	return b, ctl, cards, tree
}

// startAs runs sleep as uid:gid until the test ends.
func startAs(t *testing.T, uid, gid uint32) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// Another user's process holds card 1: a user's reset waits, saying so in
// status and in its log, and runs once the process is gone; the other
// card runs on meanwhile.
func TestForeignWait_ResetWaitsForAnotherUsersProcess(t *testing.T) {
	t.Parallel()
	alice := usertest.New(t, "ttfw")
	b, ctl, _, tree := setupForeign(t)
	p := startAs(t, alice.UID, alice.GID)
	tree.SetPids(1, p.Process.Pid)
	out := b.reset(ResetRequest{Card: cardPtr(1)})
	want := "recovery waiting: card 1 held by pid " + strconv.Itoa(p.Process.Pid) + " (" + alice.Name + ": sleep 600)"
	waitCard(b, 1, "waiting for alice's process", func(c CardStatus) bool { return c.Recovery == want })
	if info := b.waitDone(b.submit(0, "true").ID); *info.ExitCode != 0 {
		t.Fatalf("card 0's job = %+v", info.Job)
	}
	if got := ctl.calls(); len(got) != 0 {
		t.Fatalf("the reset ran under alice's process: %v", got)
	}
	p.Process.Kill()
	p.Wait()
	tree.SetPids(1)
	r := b.waitDone(out[0].JobID)
	if *r.ExitCode != 0 {
		t.Fatalf("the reset = %+v", r.Job)
	}
	log := output(t, b, r.ID)
	if !strings.Contains(log, "== "+want) || !strings.Contains(log, "== card 1 is no longer held: the recovery goes on") {
		t.Fatalf("the reset's log:\n%s", log)
	}
	if c := b.card(1); c.Recovery != "" {
		t.Fatalf("card 1 still says %q", c.Recovery)
	}
}

// A forced reset does not wait for another user's process, and the force
// is in its log; a forced request joining a waiting reset ends the wait.
func TestForeignWait_ForceProceedsAndIsLogged(t *testing.T) {
	t.Parallel()
	alice := usertest.New(t, "ttfw")
	b, ctl, _, tree := setupForeign(t)
	p := startAs(t, alice.UID, alice.GID)
	tree.SetPids(1, p.Process.Pid)
	out := b.reset(ResetRequest{Card: cardPtr(1)})
	waitCard(b, 1, "waiting", func(c CardStatus) bool { return strings.HasPrefix(c.Recovery, "recovery waiting: card 1 held by pid") })
	b.reset(ResetRequest{Card: cardPtr(1), Force: true, Owner: "root"})
	r := b.waitDone(out[0].JobID)
	log := output(t, b, r.ID)
	if got := ctl.calls(); strings.Join(got, "|") != "reset 1 --no_reinit|health 1" {
		t.Fatalf("control calls = %q, want the reset and its health check; the reset's log:\n%s", got, log)
	}
	if !strings.Contains(log, "== forced by root: the recovery goes on under pid "+strconv.Itoa(p.Process.Pid)) {
		t.Fatalf("the reset's log:\n%s", log)
	}
}

// queued's own uid: an automatic recovery waits for every process outside
// the queue, the user's own too (a tt-smi they run by hand, a notebook):
// nobody chose to reset under it. A user's own reset does not wait for
// that user's processes: it is theirs to end.
func TestForeignWait_SameUserProcessHoldsBackOnlyTheAutomaticRecovery(t *testing.T) {
	t.Parallel()
	b, ctl, cards, tree := setupForeign(t)
	p := kmdtest.Start(t, t.TempDir(), nil, "sleep", "600")
	tree.SetPids(1, p.PID())
	cards.beat(1, false)
	c := waitCard(b, 1, "the automatic recovery waiting", func(c CardStatus) bool { return strings.HasPrefix(c.Recovery, "recovery waiting:") })
	if !strings.Contains(c.Recovery, "(root: sleep 600)") && !strings.Contains(c.Recovery, ": sleep 600)") {
		t.Fatalf("card 1 says %q", c.Recovery)
	}
	time.Sleep(50 * time.Millisecond) // five rescans
	if got := ctl.calls(); len(got) != 0 {
		t.Fatalf("the automatic recovery ran under the user's process: %v", got)
	}
	ctl.flag("reset-revives", true)
	out := b.reset(ResetRequest{Card: cardPtr(1)})
	if !out[0].Coalesced {
		t.Fatalf("the user's reset did not join the automatic one: %+v", out[0])
	}
	if r := b.waitDone(out[0].JobID); *r.ExitCode != 0 {
		t.Fatalf("the reset = %+v", r.Job)
	}
	waitCard(b, 1, "healthy", func(c CardStatus) bool { return c.State == Healthy })
}

// A holder scan that could not complete counts as held.
func TestForeignWait_IncompleteScanCountsAsHeld(t *testing.T) {
	t.Parallel()
	b, ctl, _, tree := setupForeign(t)
	tree.Break(1)
	out := b.reset(ResetRequest{Card: cardPtr(1)})
	waitCard(b, 1, "waiting on the broken scan", func(c CardStatus) bool {
		return strings.HasPrefix(c.Recovery, "recovery waiting: card 1 may be held: its holder scan could not complete")
	})
	if got := ctl.calls(); len(got) != 0 {
		t.Fatalf("the reset ran on an incomplete scan: %v", got)
	}
	tree.SetPids(1)
	b.waitDone(out[0].JobID)
}
