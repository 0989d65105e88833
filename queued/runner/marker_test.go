package runner

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/usertest"
)

// neighbour starts `sleep 1000` as user u, carrying the job marker
// marker in its environment: text any user may write into their own
// processes.
func neighbour(t *testing.T, u usertest.User, marker string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sleep", "1000")
	cmd.Env = []string{JobEnvVar + "=" + marker}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// alive reports whether cmd's process has not exited (it is our child:
// a zombie until Wait, so look at its state).
func alive(cmd *exec.Cmd) bool {
	st, err := readStat("/proc", cmd.Process.Pid)
	return err == nil && st.state != 'Z'
}

// A neighbour's process that carries a job's marker is not killed by
// root because of that text: a kill by marker takes only processes the
// job's own user could signal (its uid is their real or saved uid).
func TestKillLeftovers_MarkerOfAnotherUsersProcessSpares(t *testing.T) {
	u := usertest.New(t, "ttqmark")
	spared := neighbour(t, u, "job-mark-1")
	killed, err := KillLeftovers("/proc", []Leftover{{JobID: "job-mark-1", UID: 0}}, 5*time.Second)
	if err != nil || len(killed) != 0 || !alive(spared) {
		t.Fatalf("killed %v (%v): root killed uid %d's process for the marker it carries", killed, err, u.UID)
	}
	own := neighbour(t, u, "job-mark-2")
	killed, err = KillLeftovers("/proc", []Leftover{{JobID: "job-mark-2", UID: u.UID}}, 5*time.Second)
	if err != nil || len(killed) == 0 {
		t.Fatalf("killed %v, %v: the job's own user's marked process was spared", killed, err)
	}
	waitFor(t, "the owner's marked process to die", func() bool { return !alive(own) })
}

// The same at a job's end: a root-run job's sweep spares another user's
// process that carries its marker and started while it ran.
func TestRun_SweepSparesAnotherUsersMarkedProcess(t *testing.T) {
	u := usertest.New(t, "ttqmark")
	b := setup(t, 1<<20)
	spec := b.spec("sleep 0.3")
	marker := "job-mark-run"
	spec.Env = append(testEnv(), JobEnvVar+"="+marker)
	var n *exec.Cmd
	spec.OnStart = func(Proc) { n = neighbour(t, u, marker) }
	if res := Run(spec, b.log, nil); res.ExitCode != 0 {
		t.Fatalf("%+v", res)
	}
	if !alive(n) {
		t.Fatalf("the job's sweep killed uid %d's process for the marker it carries", u.UID)
	}
}
