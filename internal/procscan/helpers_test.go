package procscan

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// writeFile writes content to dir/name, creating parent directories.
func writeFile(t testing.TB, dir, name, content string) {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// pidLines renders PIDs as a pids file: one per line, in the order given.
func pidLines(pids ...int) string {
	var b strings.Builder
	for _, p := range pids {
		b.WriteString(strconv.Itoa(p))
		b.WriteByte('\n')
	}
	return b.String()
}

// fakeStat renders a /proc/<pid>/stat line with the given comm and start
// time (field 22), shaped like the kernel's.
func fakeStat(pid int, comm string, start uint64) string {
	return fmt.Sprintf("%d (%s) S 1 %d %d 0 -1 4194560 120 0 0 0 3 1 0 0 20 0 1 0 %d 9764864 437 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n",
		pid, comm, pid, pid, start)
}

// waitUntil polls cond until it holds, failing the test after a deadline.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// startProcess starts cmd, kills and reaps it when the test ends, and waits
// until its /proc/<pid>/cmdline is want (that is, until any exec chain of
// shims and launchers has finished).
func startProcess(t testing.TB, cmd *exec.Cmd, want string) int {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %v: %v", cmd.Args, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	pid := cmd.Process.Pid
	waitUntil(t, fmt.Sprintf("pid %d to run %q", pid, want), func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		return err == nil && strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ") == want
	})
	return pid
}

// startPython starts the real interpreter behind python3 (resolved past any
// shim) in dir with args, and waits for the script to print "ready", which
// it does once it is running; it then blocks reading stdin until killed.
// It returns the PID and the command line the kernel reports for it.
func startPython(t *testing.T, dir string, env []string, args ...string) (int, string) {
	t.Helper()
	python := pythonExe(t)
	cmd := exec.Command(python, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// StdoutPipe is an *os.File from os.Pipe, which honours deadlines.
	if f, ok := stdout.(*os.File); ok {
		_ = f.SetReadDeadline(time.Now().Add(20 * time.Second))
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("%v: got %q, %v; want the line ready", cmd.Args, line, err)
	}
	return cmd.Process.Pid, python + " " + strings.Join(args, " ")
}

// pythonExe returns the path of the real python3 binary, skipping the test
// when there is none: make test must pass on a machine with only Go.
func pythonExe(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Fatalf("asking python3 for its executable: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// readyScript prints "ready" once running, then blocks until stdin closes.
const readyScript = "import sys\nprint('ready', flush=True)\nsys.stdin.read()\n"

// outstandingReads is the number of identity reads in flight.
func (s *Scanner) outstandingReads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// scanning reports whether a scan started by ScanContext is outstanding.
func (s *Scanner) scanning() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.result != nil
}
