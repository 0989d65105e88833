package runner

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/internal/usertest"
	"github.com/ttkit/ttkit/queued/account"
)

// runAs runs cmd in dir as the account and returns its output.
func runAs(t *testing.T, a account.Account, dir, cmd string) (Result, string) {
	t.Helper()
	b := setup(t, 1<<20)
	spec := b.spec(cmd)
	spec.Dir = dir
	spec.Account = &a
	spec.Env = append([]string{"PATH=/usr/bin:/bin"}, a.Env()...)
	res := Run(spec, b.log, nil)
	b.log.Close()
	return res, b.output(t)
}

// A job runs with its submitter's uid, primary gid and every supplementary
// group, and what it creates belongs to that user.
func TestRun_AsTheSubmitter(t *testing.T) {
	gname, gid := usertest.Group(t, "ttqg")
	u := usertest.New(t, "ttqa", gname)
	a, err := account.LookupUID(u.UID)
	if err != nil {
		t.Fatal(err)
	}
	dir := usertest.OpenDir(t)
	os.Chown(dir, int(u.UID), int(u.GID))
	res, out := runAs(t, a, dir, "id -u; id -g; id -G; touch made; stat -c %u:%g made; pwd")
	if res.ExitCode != 0 || res.Err != nil {
		t.Fatalf("exit %d, %v: %s", res.ExitCode, res.Err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 {
		t.Fatalf("output %q", out)
	}
	uid, pgid := strconv.Itoa(int(u.UID)), strconv.Itoa(int(u.GID))
	if lines[0] != uid || lines[1] != pgid {
		t.Errorf("ran as %s:%s, want %s:%s", lines[0], lines[1], uid, pgid)
	}
	groups := strings.Fields(lines[2])
	for _, want := range []string{pgid, strconv.Itoa(int(gid))} {
		if !strings.Contains(" "+lines[2]+" ", " "+want+" ") {
			t.Errorf("groups %v lack %s", groups, want)
		}
	}
	if strings.Contains(" "+lines[2]+" ", " 0 ") {
		t.Errorf("groups %v keep root's group", groups)
	}
	if lines[3] != uid+":"+pgid {
		t.Errorf("the file it made belongs to %s, want %s:%s", lines[3], uid, pgid)
	}
	if lines[4] != dir {
		t.Errorf("ran in %s, want %s", lines[4], dir)
	}
}

// The working directory is entered as the user: one the user cannot enter
// fails the job, saying so, instead of being entered as root.
func TestRun_WorkingDirectoryTheUserCannotEnter(t *testing.T) {
	u := usertest.New(t, "ttqa")
	a, err := account.LookupUID(u.UID)
	if err != nil {
		t.Fatal(err)
	}
	closed := filepath.Join(usertest.OpenDir(t), "root-only")
	if err := os.Mkdir(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	res, out := runAs(t, a, closed, "echo ran")
	if res.Err == nil || res.Iterations != 0 || strings.Contains(out, "ran") {
		t.Fatalf("a directory the user cannot enter: exit %d, err %v, output %q", res.ExitCode, res.Err, out)
	}
	msg := res.Err.Error()
	for _, want := range []string{"working directory " + closed, "permission denied", u.Name} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	// A missing directory says so too.
	res, _ = runAs(t, a, closed+"-missing", "true")
	if res.Err == nil || !strings.Contains(res.Err.Error(), "no such file or directory") {
		t.Errorf("missing directory: %v", res.Err)
	}
	// Under a directory the user cannot search, what exists and what does
	// not read the same: the answer is the user's view, not root's.
	if err := os.Mkdir(filepath.Join(closed, "exists"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, _ = runAs(t, a, filepath.Join(closed, "exists"), "true")
	there := res.Err
	res, _ = runAs(t, a, filepath.Join(closed, "absent"), "true")
	absent := res.Err
	if there == nil || absent == nil || !strings.Contains(there.Error(), "permission denied") || !strings.Contains(absent.Error(), "permission denied") {
		t.Errorf("below a closed directory: existing %v, absent %v; want permission denied for both", there, absent)
	}
}

// A job run as its submitter gets an audit session of its own, with the
// submitter as its login uid: the id every process it starts inherits
// and cannot change, which finds them where no cgroup does. The user
// cannot leave it: writing its loginuid is refused.
func TestRun_AsTheSubmitterInAnAuditSessionOfItsOwn(t *testing.T) {
	if !auditSessions() {
		t.Skip("no audit sessions here")
	}
	u := usertest.New(t, "ttqau")
	a, err := account.LookupUID(u.UID)
	if err != nil {
		t.Fatal(err)
	}
	res, out := runAs(t, a, usertest.OpenDir(t),
		"cat /proc/self/loginuid; echo; cat /proc/self/sessionid; echo; (echo 4294967295 >/proc/self/loginuid) 2>/dev/null && echo left || echo stayed")
	lines := strings.Fields(out)
	if res.ExitCode != 0 || len(lines) != 3 {
		t.Fatalf("%+v: %q", res, out)
	}
	own, _ := os.ReadFile("/proc/self/sessionid")
	if lines[0] != strconv.Itoa(int(u.UID)) || lines[1] == strings.TrimSpace(string(own)) || lines[1] == "4294967295" {
		t.Errorf("loginuid %s, session %s (queued's %s): want uid %d in a session of its own", lines[0], lines[1], own, u.UID)
	}
	if lines[2] != "stayed" {
		t.Error("the job could change its loginuid, and with it leave its audit session")
	}
}
