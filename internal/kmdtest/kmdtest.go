// Package kmdtest builds fake Tenstorrent KMD driver trees that list real
// processes a test started. There is no Tenstorrent hardware on the machines
// that test ttkit, so every reader of the driver's pids files (procscan, the
// receiver, the queue's foreign-holder check, the end-to-end tests) is
// exercised against these trees and the real /proc.
package kmdtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Tree is a fake driver directory: one numbered directory per device, each
// with a pids file holding one decimal PID per line, one line per open file
// descriptor, as /proc/driver/tenstorrent/<n>/pids does.
type Tree struct {
	// Dir is the driver path to hand to the code under test.
	Dir string
	tb  testing.TB
}

// NewTree creates an empty driver tree at dir.
func NewTree(tb testing.TB, dir string) *Tree {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	return &Tree{Dir: dir, tb: tb}
}

// PidsPath is the pids file of a device.
func (tr *Tree) PidsPath(device int) string {
	return filepath.Join(tr.Dir, strconv.Itoa(device), "pids")
}

// SetPids replaces a device's pids file atomically, so a concurrent reader
// sees the old list or the new one, never half of each. It also mends a
// file that Break made unreadable.
func (tr *Tree) SetPids(device int, pids ...int) {
	tr.tb.Helper()
	var b strings.Builder
	for _, p := range pids {
		fmt.Fprintf(&b, "%d\n", p)
	}
	path := tr.PidsPath(device)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tr.tb.Fatal(err)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		if err := os.RemoveAll(path); err != nil {
			tr.tb.Fatal(err)
		}
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		tr.tb.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tr.tb.Fatal(err)
	}
}

// Break makes a device's pids file unreadable. Tests run as root in CI,
// where file permissions do not stop a read, so the file becomes a
// directory: reading it fails at once with EISDIR.
func (tr *Tree) Break(device int) {
	tr.tb.Helper()
	path := tr.PidsPath(device)
	if err := os.RemoveAll(path); err != nil {
		tr.tb.Fatal(err)
	}
	if err := os.MkdirAll(path, 0o755); err != nil {
		tr.tb.Fatal(err)
	}
}

// Process is a real process started for a test, with the labels the
// receiver is expected to give it.
type Process struct {
	Cmd *exec.Cmd
	// FriendlyName and CommandLine are what tt_process should report.
	FriendlyName string
	CommandLine  string
	stdin        *os.File
}

// PID is the process's ID in the test's PID namespace.
func (p *Process) PID() int { return p.Cmd.Process.Pid }

// Stop kills the process and reaps it. It is safe to call twice.
func (p *Process) Stop() {
	if p.stdin != nil {
		_ = p.stdin.Close()
		p.stdin = nil
	}
	if p.Cmd.ProcessState == nil {
		_ = p.Cmd.Process.Kill()
		_ = p.Cmd.Wait()
	}
}

// WaitCommandLine waits until /proc/<pid>/cmdline reads as CommandLine:
// Start returns before the child's execve is through, and a launcher such
// as taskset execs its command later still.
func (p *Process) WaitCommandLine(tb testing.TB, within time.Duration) {
	tb.Helper()
	path := filepath.Join("/proc", strconv.Itoa(p.PID()), "cmdline")
	deadline := time.Now().Add(within)
	for {
		b, err := os.ReadFile(path)
		got := strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " ")
		if err == nil && got == p.CommandLine {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("pid %d: command line %q, want %q after %s (err %v)", p.PID(), got, p.CommandLine, within, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Start runs argv in dir until the test ends. argv[0] is looked up on PATH
// (or used as a path) but stays exactly as given in the process's argument
// vector, so /proc/<pid>/cmdline is predictable. The process's stdin is a
// pipe held open for its lifetime, so a script can block by reading it.
func Start(tb testing.TB, dir string, env []string, argv ...string) *Process {
	tb.Helper()
	path, err := exec.LookPath(argv[0])
	if err != nil {
		tb.Fatalf("starting %v: %v", argv, err)
	}
	if argv[0] == "python3" {
		path = Python(tb)
	}
	r, w, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Dir: dir, Env: append(os.Environ(), env...), Stdin: r}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting %v: %v", argv, err)
	}
	_ = r.Close()
	p := &Process{Cmd: cmd, CommandLine: strings.Join(argv, " "), stdin: w}
	tb.Cleanup(p.Stop)
	return p
}

// Python returns the Python interpreter for workloads. Debian's
// /usr/bin/python3 is preferred because a version-manager shim on PATH
// re-executes the interpreter under a different argv[0].
func Python(tb testing.TB) string {
	tb.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	p, err := exec.LookPath("python3")
	if err != nil {
		tb.Fatalf("python3 is needed for the workloads: %v", err)
	}
	return p
}

// Workloads starts the processes a shared host typically has on its cards:
// a training script, a pytest run (through a stand-in pytest package, since
// pytest need not be installed), and a plain binary under taskset. Their
// FriendlyName and CommandLine are set to what tt_process must report.
func Workloads(tb testing.TB, dir string) []*Process {
	tb.Helper()
	block := "import sys\nsys.stdin.read()\n"
	for name, content := range map[string]string{
		"train.py":                block,
		"tests/test_matmul.py":    "def test_fast():\n    pass\n",
		"site/pytest/__init__.py": "",
		"site/pytest/__main__.py": block,
	} {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	pythonPath := "PYTHONPATH=" + filepath.Join(dir, "site")
	train := Start(tb, dir, nil, "python3", "train.py", "--epochs", "3")
	train.FriendlyName = "train.py"
	pytest := Start(tb, dir, []string{pythonPath}, "python3", "-m", "pytest", "-k", "fast", "tests/test_matmul.py")
	pytest.FriendlyName = "test_matmul.py"
	// taskset execs its command, so the process's own argv is sleep's.
	sleeper := Start(tb, dir, nil, "taskset", "-c", "0", "sleep", "600")
	sleeper.FriendlyName, sleeper.CommandLine = "sleep", "sleep 600"
	// Start returns once the process is forked; until its execve is
	// through, /proc shows an empty or a launcher's command line.
	work := []*Process{train, pytest, sleeper}
	for _, p := range work {
		p.WaitCommandLine(tb, 10*time.Second)
	}
	return work
}

// FakeSelfPID is the PID a fake procfs made by FakeProcs names as its own
// (its self link), for the code under test to take as the collector's.
const FakeSelfPID = 31337

// FakeProcs writes a fake procfs at dir describing n processes with PIDs
// from first upwards, each running "python3 worker.py <i>", and a self link
// naming FakeSelfPID. It returns the PIDs. Benchmarks of thousands of
// holders use it: real processes cost too much to start.
func FakeProcs(tb testing.TB, dir string, first, n int) []int {
	tb.Helper()
	pids := make([]int, n)
	for i := range pids {
		pid := first + i
		pids[i] = pid
		pd := filepath.Join(dir, strconv.Itoa(pid))
		if err := os.MkdirAll(pd, 0o755); err != nil {
			tb.Fatal(err)
		}
		stat := fmt.Sprintf("%d (python3) S 1 %d %d 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", pid, pid, pid, 1000+i)
		for name, content := range map[string]string{
			"stat":    stat,
			"cmdline": "python3\x00worker.py\x00" + strconv.Itoa(i) + "\x00",
			"comm":    "python3\n",
		} {
			if err := os.WriteFile(filepath.Join(pd, name), []byte(content), 0o644); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := os.Symlink(strconv.Itoa(FakeSelfPID), filepath.Join(dir, "self")); err != nil {
		tb.Fatal(err)
	}
	return pids
}
