package scheduler

import (
	"github.com/ttkit/ttkit/queued/api"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/internal/usertest"
	"github.com/ttkit/ttkit/queued/account"
	"github.com/ttkit/ttkit/queued/store"
)

// submitAs queues cmd on card 0 for the user, in dir.
func (b *bundle) submitAs(u usertest.User, dir, cmd string, env map[string]string) JobInfo {
	b.t.Helper()
	uid := u.UID
	info, err := b.s.Submit(JobSpec{Card: 0, Cmd: cmd, Cwd: dir, Env: env, OwnerUID: &uid, Owner: u.Name})
	if err != nil {
		b.t.Fatal(err)
	}
	return info
}

// In system mode each job runs as its owner, in the owner's login
// environment with what the CLI forwarded on top, and nothing of the
// service's own environment.
func TestScheduler_RunAsRunsEachJobAsItsOwner(t *testing.T) {
	alice, bob := usertest.New(t, "ttqa"), usertest.New(t, "ttqb")
	b := setup(t, func(o *Options) {
		o.Mode = api.SystemMode
		o.BaseEnv = []string{"PATH=/usr/bin:/bin", "ROOT_SECRET=hunter2", "HOME=/root"}
	})
	dir := usertest.OpenDir(t)
	cmd := `id -u; echo "$HOME|$USER|$LOGNAME|$SHELL|$PATH|${ROOT_SECRET-unset}|$FORWARDED|$TT_QUEUE_JOB_ID"`
	ja := b.submitAs(alice, dir, cmd, map[string]string{"FORWARDED": "venv", "PATH": "/opt/venv/bin:/usr/bin:/bin"})
	jb := b.submitAs(bob, dir, cmd, nil)
	for _, c := range []struct {
		u    usertest.User
		id   string
		want string
	}{
		{alice, ja.ID, alice.Home + "|" + alice.Name + "|" + alice.Name + "|/bin/bash|/opt/venv/bin:/usr/bin:/bin|unset|venv|" + ja.ID},
		{bob, jb.ID, bob.Home + "|" + bob.Name + "|" + bob.Name + "|/bin/bash|/usr/local/bin:/usr/bin:/bin|unset||" + jb.ID},
	} {
		done := b.waitDone(c.id)
		if done.Outcome != store.OutcomeSuccess {
			t.Fatalf("job of %s: %s %s", c.u.Name, done.Outcome, done.Error)
		}
		lines := strings.Split(strings.TrimSpace(output(t, b, c.id)), "\n")
		if len(lines) != 2 || lines[0] != strconv.Itoa(int(c.u.UID)) || lines[1] != c.want {
			t.Errorf("job of %s printed %q, want uid %d and %q", c.u.Name, lines, c.u.UID, c.want)
		}
		if done.OwnerUID == nil || *done.OwnerUID != c.u.UID || done.Owner != c.u.Name {
			t.Errorf("record owner %v %q, want %d %s", done.OwnerUID, done.Owner, c.u.UID, c.u.Name)
		}
	}
}

// A user cannot read another user's private file through a job: the job
// has the user's own permissions, not queued's.
func TestScheduler_RunAsCannotReadAnotherUsersFile(t *testing.T) {
	alice, bob := usertest.New(t, "ttqa"), usertest.New(t, "ttqb")
	secret := filepath.Join(alice.Home, "secret")
	if err := os.WriteFile(secret, []byte("alice's"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chown(secret, int(alice.UID), int(alice.GID))
	b := setup(t, func(o *Options) { o.Mode = api.SystemMode })
	dir := usertest.OpenDir(t)
	j := b.submitAs(bob, dir, "cat "+secret, nil)
	done := b.waitDone(j.ID)
	out := output(t, b, j.ID)
	if done.Outcome == store.OutcomeSuccess || strings.Contains(out, "alice's") || !strings.Contains(out, "Permission denied") {
		t.Errorf("bob's job read alice's file: %s, %q", done.Outcome, out)
	}
	own := b.submitAs(alice, dir, "cat "+secret, nil)
	if done := b.waitDone(own.ID); done.Outcome != store.OutcomeSuccess || output(t, b, own.ID) != "alice's" {
		t.Errorf("alice's own job: %s %q", done.Outcome, output(t, b, own.ID))
	}
}

// A job whose user is gone, or that has no recorded owner, never runs as
// root: it fails at start, saying why.
func TestScheduler_RunAsRefusesAJobWithoutAUser(t *testing.T) {
	b := setup(t, func(o *Options) { o.Mode = api.SystemMode })
	dir := usertest.OpenDir(t)
	gone := uint32(3999999001)
	info, err := b.s.Submit(JobSpec{Card: 0, Cmd: "touch ran", Cwd: dir, OwnerUID: &gone, Owner: "ghost"})
	if err != nil {
		t.Fatal(err)
	}
	done := b.waitDone(info.ID)
	if done.Outcome != store.OutcomeFailure || !strings.Contains(done.Error, "3999999001") || done.Iterations != 0 {
		t.Errorf("job of a deleted user: %s %q (%d iterations)", done.Outcome, done.Error, done.Iterations)
	}
	info = b.submit(0, "touch ran") // no owner
	done = b.waitDone(info.ID)
	if done.Outcome != store.OutcomeFailure || !strings.Contains(done.Error, "no recorded owner") {
		t.Errorf("job without an owner: %s %q", done.Outcome, done.Error)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("a job ran without a user")
	}
}

// Resets run as the configured reset user, in its home, with its name.
func TestScheduler_ResetsRunAsTheResetUser(t *testing.T) {
	op := usertest.New(t, "ttqr")
	acct, err := account.LookupUID(op.UID)
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, func(o *Options) {
		o.Mode = api.SystemMode
		o.ResetAccount = &acct
		o.Controls = Controls{Reset: `echo "reset $(id -u) $HOME $USER $(pwd)" #`, HealthCheck: "true"}
	})
	card := 0
	outs, err := b.s.Reset(ResetRequest{Card: &card})
	if err != nil {
		t.Fatal(err)
	}
	b.waitDone(outs[0].JobID)
	want := "reset " + strconv.Itoa(int(op.UID)) + " " + op.Home + " " + op.Name + " " + op.Home
	if out := output(t, b, outs[0].JobID); !strings.Contains(out, want) {
		t.Errorf("reset output %q, want %q", out, want)
	}
}

// A uid that changed hands between submit and start (the user deleted,
// the uid given to a new one) does not run the old user's job as the new
// user: the job fails, naming both.
func TestScheduler_RunAsRefusesAUIDNowSomeoneElses(t *testing.T) {
	b := setup(t, func(o *Options) { o.Mode = api.SystemMode })
	bob := usertest.New(t, "ttqb")
	dir := bob.Home
	uid := bob.UID
	info, err := b.s.Submit(JobSpec{Card: 0, Cmd: "touch ran", Cwd: dir, OwnerUID: &uid, Owner: "departed"})
	if err != nil {
		t.Fatal(err)
	}
	done := b.waitDone(info.ID)
	if done.Outcome != store.OutcomeFailure || !strings.Contains(done.Error, "departed") || !strings.Contains(done.Error, bob.Name) {
		t.Errorf("job of a reused uid: %s %q", done.Outcome, done.Error)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("the job ran as the uid's new user")
	}
}
