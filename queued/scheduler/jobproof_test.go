package scheduler

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ttkit/ttkit/queued/store"
)

// fakeProc writes a /proc/<pid> with stat, status and cgroup.
func fakeProc(t *testing.T, root string, pid, ppid, sid int, start uint64, uid uint32, cgroup string) {
	t.Helper()
	dir := filepath.Join(root, fmt.Sprint(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stat := fmt.Sprintf("%d (x) S %d %d %d 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", pid, ppid, sid, sid, start)
	files := map[string]string{"stat": stat, "status": fmt.Sprintf("Name:\tx\nUid:\t%d\t%d\t%d\t%d\n", uid, uid, uid, uid),
		"cgroup": "0::" + cgroup + "\n"}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The evidence rule, against processes an attacker could make: another
// user's process in the job's session (a setuid program's child keeps
// the session, not the uid), a process of the job's user that is not of
// its session nor descends from its leader, a process whose ancestor has
// the leader's PID but not its start time; and what proves a process the
// job's: its session, its parent chain, its cgroup.
func TestJobProof_EvidenceRule(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	const leader, start, uid = 100, 5000, 1000
	const cg = "/system.slice/queued.service/job-" + "0123456789abcdef0123456789abcdef" + ".42.7"
	id := "0123456789abcdef0123456789abcdef"
	fakeProc(t, root, leader, 1, leader, start, uid, cg)
	fakeProc(t, root, 101, leader, leader, start+1, uid, cg)         // its child: session (and cgroup)
	fakeProc(t, root, 102, leader, leader, start+1, 2000, "/other")  // another uid in its session
	fakeProc(t, root, 103, 1, 103, start+2, uid, "/user.slice/x")    // its user, own session, not below it
	fakeProc(t, root, 104, 101, 104, start+3, uid, "/user.slice/y")  // setsid below the child: parent chain
	fakeProc(t, root, 105, 1, 105, start+4, 2000, cg+"/sub")         // escaped into a sub-cgroup: cgroup
	fakeProc(t, root, 106, 104, 106, start+5, 2000, "/user.slice/z") // another uid below the job: no
	job := ownJob{id: id, kind: store.KindJob, leader: leader, start: start, uid: uid, hasUID: true}
	cases := []struct {
		pid  int
		want bool
	}{{leader, true}, {101, true}, {102, false}, {103, false}, {104, true}, {105, true}, {106, false}}
	pr := newProver(root, []ownJob{job})
	for _, c := range cases {
		if got := pr.ownerOf(c.pid) != nil; got != c.want {
			t.Errorf("pid %d the job's: %v, want %v", c.pid, got, c.want)
		}
	}
	// The leader's PID now names another process (another start time):
	// its session and descendants prove nothing, and its cgroup is not
	// looked up through it.
	restarted := job
	restarted.start = start - 1
	pr = newProver(root, []ownJob{restarted})
	for _, pid := range []int{leader, 101, 104, 105} {
		if pr.ownerOf(pid) != nil {
			t.Errorf("pid %d taken for a job whose leader is gone", pid)
		}
	}
	// Without a known uid only the cgroup proves anything.
	noUID := job
	noUID.hasUID = false
	pr = newProver(root, []ownJob{noUID})
	if pr.ownerOf(104) != nil || pr.ownerOf(105) == nil {
		t.Errorf("without a uid: 104 %v, 105 %v", pr.ownerOf(104), pr.ownerOf(105))
	}
}
