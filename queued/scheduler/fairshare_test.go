package scheduler

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// submitBy submits cmd to card as the user uid (named name).
func (b *bundle) submitBy(card int, cmd string, uid uint32, name string) (JobInfo, error) {
	return b.s.Submit(JobSpec{Card: card, Cmd: cmd, Cwd: b.work, OwnerUID: &uid, Owner: name})
}

// TestSubmit_PerUserQueueLimit: one user cannot take the whole queue. With
// 8 jobs allowed over all cards, each user may have a quarter of them (2)
// queued by default; the third is refused with ErrQueueFull saying whose
// limit it is, while another user's jobs are still taken and root, which
// is exempt, is not held to it. A job that starts makes room again.
func TestSubmit_PerUserQueueLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.MaxQueued = 8 })
	release := b.holdCard(0)
	defer release()
	const alice, bob = 1001, 1002
	for range 2 {
		if _, err := b.submitBy(0, "true", alice, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	_, err := b.submitBy(1, "true", alice, "alice")
	if !errors.Is(err, ErrQueueFull) {
		t.Fatalf("alice's third job: %v; want ErrQueueFull for her limit of 2", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "alice (uid 1001) has 2 jobs queued") || !strings.Contains(msg, "one user may have 2") {
		t.Errorf("refusal %q does not say whose jobs fill the limit", msg)
	}
	if _, err := b.submitBy(0, "true", bob, "bob"); err != nil {
		t.Fatalf("bob's job refused while alice is at her limit: %v", err)
	}
	for range 3 {
		if _, err := b.submitBy(0, "true", 0, "root"); err != nil {
			t.Fatalf("root's job refused: %v", err)
		}
	}
	// A job of alice's on the idle card starts, and she may queue one more.
	id := func() string {
		t.Helper()
		st := b.s.Status()
		for _, j := range st.Cards[0].Queue {
			if j.OwnerUID != nil && *j.OwnerUID == alice {
				return j.ID
			}
		}
		t.Fatal("no job of alice's queued")
		return ""
	}()
	if _, err := b.s.Kill(id); err != nil {
		t.Fatal(err)
	}
	if _, err := b.submitBy(1, "true", alice, "alice"); err != nil {
		t.Fatalf("alice's job after one of hers left the queue: %v", err)
	}
}

// TestSubmit_FullQueueSaysWhose: when the whole queue is full the refusal
// names the users whose jobs fill it, most first.
func TestSubmit_FullQueueSaysWhose(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.MaxQueued = 8 })
	release := b.holdCard(0)
	defer release()
	for i, u := range []struct {
		uid  uint32
		name string
		n    int
	}{{1001, "alice", 2}, {1002, "bob", 2}, {0, "root", 3}, {1003, "carol", 1}} {
		for range u.n {
			if _, err := b.submitBy(0, "true", u.uid, u.name); err != nil {
				t.Fatalf("user %d: %v", i, err)
			}
		}
	}
	_, err := b.submitBy(0, "true", 1004, "dave")
	if !errors.Is(err, ErrQueueFull) {
		t.Fatalf("dave's job in a full queue: %v; want ErrQueueFull", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "8 jobs queued: root (uid 0) 3, alice (uid 1001) 2, bob (uid 1002) 2, carol (uid 1003) 1") {
		t.Errorf("refusal %q does not name whose jobs fill the queue", msg)
	}
}

// TestOutputBudget_PerUserShare: one user's verbose jobs delete their own
// oldest output, not another user's: each user keeps at most a quarter of
// MaxOutputBytes (at least one job's MaxLogBytes), and what is deleted is
// theirs even when another user's output is older.
func TestOutputBudget_PerUserShare(t *testing.T) {
	t.Parallel()
	const budget = 200 << 10
	b := setup(t, func(o *Options) { o.MaxOutputBytes = budget; o.MaxLogBytes = 40 << 10 })
	const alice, bob = 1001, 1002
	run := func(uid uint32, name string, size int) string {
		t.Helper()
		info, err := b.submitBy(0, fmt.Sprintf("head -c %d /dev/zero", size), uid, name)
		if err != nil {
			t.Fatal(err)
		}
		b.waitDone(info.ID)
		return info.ID
	}
	bobs := []string{run(bob, "bob", 20<<10), run(bob, "bob", 20<<10)}
	var alices []string
	for range 6 {
		alices = append(alices, run(alice, "alice", 30<<10))
	}
	// alice's share is 50 KiB: one of her 30 KiB outputs fits.
	poll(t, "alice's output within her share", func() bool {
		_, err := os.Stat(b.s.OutputPath(alices[len(alices)-2]))
		return errors.Is(err, os.ErrNotExist)
	})
	for _, id := range bobs {
		if _, err := os.Stat(b.s.OutputPath(id)); err != nil {
			t.Errorf("bob's output was deleted for alice's: %v", err)
		}
	}
	for i, id := range alices {
		info, err := b.s.Job(id)
		if err != nil {
			t.Fatal(err)
		}
		kept := i == len(alices)-1
		if kept == !info.OutputDeletedAt.IsZero() {
			t.Errorf("alice's job %d of %d: output_deleted_at %v; want kept %v", i+1, len(alices), info.OutputDeletedAt, kept)
		}
	}
}

// TestRetention_OneUsersFinishedJobsPushOutOnlyTheirOwn: on a shared
// daemon, a user who runs many jobs pushes out their own oldest records,
// never another user's (whose results would then be lost): each user
// keeps their newest MaxCompletedPerUser (a quarter of MaxCompleted by
// default) finished jobs; root, exempt, only the total.
func TestRetention_OneUsersFinishedJobsPushOutOnlyTheirOwn(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.MaxCompleted = 12; o.RetentionInterval = 20 * time.Millisecond })
	const alice, bob = 1001, 1002
	run := func(n int, uid uint32, name string) []string {
		var ids []string
		for range n {
			j, err := b.submitBy(0, "true", uid, name)
			if err != nil {
				t.Fatal(err)
			}
			b.waitDone(j.ID)
			ids = append(ids, j.ID)
		}
		return ids
	}
	bobs := run(2, bob, "bob") // the oldest of all
	roots := run(4, 0, "root")
	alices := run(12, alice, "alice")
	kept := func(id string) bool { _, err := b.s.Job(id); return !errors.Is(err, ErrNotFound) }
	poll(t, "alice's oldest records pruned", func() bool { return !kept(alices[8]) })
	for _, id := range append(append(bobs, roots...), alices[9:]...) {
		if !kept(id) {
			t.Errorf("job %s pruned; want bob's two, root's four and alice's newest three kept", id)
		}
	}
	if b.s.MaxCompletedPerUser() != 3 {
		t.Errorf("MaxCompletedPerUser() = %d, want a quarter of 12", b.s.MaxCompletedPerUser())
	}
}
