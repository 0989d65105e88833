package procscan

import (
	"os"
	"os/exec"
	"testing"

	"github.com/ttkit/ttkit/internal/proctest"
)

// startZombieLeader starts proctest.ZombieLeader with env and two
// arguments, and waits for its main thread to exit. It returns the PID
// and the command line it was given.
func startZombieLeader(t *testing.T, env ...string) (int, string) {
	t.Helper()
	bin := proctest.ZombieLeader(t)
	cmd := exec.Command(bin, "--model", "llama")
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	pid := cmd.Process.Pid
	proctest.WaitMainThreadExited(t, pid)
	return pid, bin + " --model llama"
}

// A holder whose main thread exited is named and attributed through a
// thread that still runs: its command line, not its comm, and the job
// its environment names.
func TestScan_AHolderWhoseMainThreadExited(t *testing.T) {
	t.Parallel()
	pid, want := startZombieLeader(t, JobEnvVar+"="+testJob)
	driver := t.TempDir()
	writeFile(t, driver, "0/pids", pidLines(pid))
	s := New(Options{DriverPath: driver, Attribution: AttributionOptions{QueuedJob: true}})
	t.Cleanup(func() { _ = s.Close() })
	id, ok := identities(t, s)[pid]
	if !ok {
		t.Fatalf("pid %d, alive in a thread, is not reported", pid)
	}
	if id.CommandLine != want || id.Source != SourceCmdline {
		t.Errorf("command line %q from %v; want %q from its cmdline", id.CommandLine, id.Source, want)
	}
	if id.Attribution.QueuedJob != testJob {
		t.Errorf("queued job %q; want %s", id.Attribution.QueuedJob, testJob)
	}
}
