package runner

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/proctest"
)

// zombieLeader starts proctest.ZombieLeader in a session of its own,
// carrying marker, and waits for its main thread to exit. It returns the
// process and a channel closed once it is reaped.
func zombieLeader(t *testing.T, marker string) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	bin := proctest.ZombieLeader(t)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), JobEnvVar+"="+marker)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
	})
	proctest.WaitMainThreadExited(t, cmd.Process.Pid)
	return cmd, exited
}

// A leftover whose main thread exited reads Z in its stat but lives on in
// its other threads, holding whatever it opened (a card): the sweep by
// marker kills it rather than taking it for a zombie.
func TestKillLeftovers_AProcessWhoseMainThreadExitedIsNoZombie(t *testing.T) {
	t.Parallel()
	cmd, exited := zombieLeader(t, "job-zl")
	killed, err := KillLeftovers("/proc", []Leftover{{JobID: "job-zl"}}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("pid %d, its main thread gone and another running, outlived the sweep (killed %v)", cmd.Process.Pid, killed)
	}
}

// The job a card holder claims is read from the same environment: a
// holder whose main thread exited still names its job.
func TestJobIDOf_AProcessWhoseMainThreadExited(t *testing.T) {
	t.Parallel()
	cmd, _ := zombieLeader(t, "job-zl-holder")
	if id, err := JobIDOf("/proc", cmd.Process.Pid); err != nil || id != "job-zl-holder" {
		t.Fatalf("JobIDOf(%d) = %q, %v; want job-zl-holder", cmd.Process.Pid, id, err)
	}
}

// A job that leaves such a process in a session of its own: the sweep at
// its end kills it. (Where the PID window holds the process, the sweep
// finds it by its running thread's ID too; a sweep of every process, as
// after a restart, sees only its Z, which KillLeftovers' test covers.)
func TestRun_SweepTakesAProcessWhoseMainThreadExited(t *testing.T) {
	t.Parallel()
	b := setup(t, 1<<20)
	bin, pidFile := proctest.ZombieLeader(t), filepath.Join(b.dir, "pid")
	// The job ends once its leftover's main thread has exited.
	spec := b.spec("setsid " + bin + " </dev/null >/dev/null 2>&1 & p=$!; echo $p > " + pidFile +
		`; until [ "$(cut -d' ' -f3 /proc/$p/stat)" = Z ]; do sleep 0.01; done`)
	spec.Env = append(spec.Env, JobEnvVar+"=zl-run")
	if res := Run(spec, b.log, nil); res.ExitCode != 0 || res.Err != nil {
		t.Fatalf("%+v", res)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	waitFor(t, "the leftover to be gone", func() bool {
		tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		return err != nil || len(tasks) <= 1 // reaped, or a zombie with no thread left
	})
}
