package proctest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// The program is what ZombieLeader says: Z in its stat, an empty
// cmdline and an environ refused with ESRCH while a thread lives on.
func TestZombieLeader(t *testing.T) {
	cmd := exec.Command(ZombieLeader(t))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	WaitMainThreadExited(t, cmd.Process.Pid)
	dir := fmt.Sprintf("/proc/%d", cmd.Process.Pid)
	if tasks, err := os.ReadDir(dir + "/task"); err != nil || len(tasks) != 2 {
		t.Errorf("%s/task: %d tasks, %v; want the leader and one running thread", dir, len(tasks), err)
	}
	if b, err := os.ReadFile(dir + "/cmdline"); err != nil || len(b) != 0 {
		t.Errorf("%s/cmdline: %q, %v; want it empty", dir, b, err)
	}
	if _, err := os.ReadFile(dir + "/environ"); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("%s/environ: %v; want ESRCH", dir, err)
	}
}
