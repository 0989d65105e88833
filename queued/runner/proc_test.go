package runner

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestProcessGroupAndJobIDOf(t *testing.T) {
	// A child in a group of its own carrying a job id, like a job's
	// process, and a plain child in the test's group without one.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, JobEnvVar+"=") {
			env = append(env, kv)
		}
	}
	start := func(env []string, setpgid bool) *exec.Cmd {
		cmd := exec.Command("sleep", "60")
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: setpgid}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	job := start(append(env[:len(env):len(env)], JobEnvVar+"=0123456789abcdef0123456789abcdef"), true)
	plain := start(env, false)

	if g, err := ProcessGroup("/proc", job.Process.Pid); err != nil || g != job.Process.Pid {
		t.Fatalf("ProcessGroup(job) = %d, %v; want its own pid %d", g, err, job.Process.Pid)
	}
	if g, err := ProcessGroup("/proc", plain.Process.Pid); err != nil || g != syscall.Getpgrp() {
		t.Fatalf("ProcessGroup(plain) = %d, %v; want the test's group %d", g, err, syscall.Getpgrp())
	}
	if id, err := JobIDOf("/proc", job.Process.Pid); err != nil || id != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("JobIDOf(job) = %q, %v", id, err)
	}
	if id, err := JobIDOf("/proc", plain.Process.Pid); err != nil || id != "" {
		t.Fatalf("JobIDOf(plain) = %q, %v; want none", id, err)
	}
	if _, err := JobIDOf(t.TempDir(), 1); err == nil {
		t.Fatal("JobIDOf of a missing process: no error")
	}
}

func TestResumeLog_AppendsToExistingOutput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.log")
	first := NewLog(path, 100)
	first.Write([]byte("attempt 1\n"))
	first.Close()

	second := ResumeLog(path, 100)
	if st := second.State(); st.Size != int64(len("attempt 1\n")) {
		t.Fatalf("resumed size = %d", st.Size)
	}
	second.Write([]byte("attempt 2\n"))
	second.Write([]byte(strings.Repeat("x", 100)))
	second.Close()
	data, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(data), "attempt 1\nattempt 2\nxxx") || !strings.Contains(string(data), CutMarker(20)) {
		t.Fatalf("output = %q", data)
	}
	if st := second.State(); !st.Truncated || st.Dropped != 20 {
		t.Fatalf("state = %+v; want truncated with 20 bytes dropped", st)
	}

	fresh := ResumeLog(filepath.Join(t.TempDir(), "none.log"), 100)
	fresh.Write([]byte("new"))
	fresh.Close()
	if data, _ := os.ReadFile(fresh.Path()); string(data) != "new" {
		t.Fatalf("output of a resumed missing file = %q", data)
	}
}

// parseStat takes the fields after the command name's last ')', whatever
// the name holds, and readStatFile reads a live process's stat through a
// reused buffer as readStat does.
func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		line string
		want procStat
		ok   bool
	}{
		{"42 (bash) S 1 42 42 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 123456 9 10\n", procStat{state: 'S', pgrp: 42, session: 42, start: 123456}, true},
		{"7 (a) b) (c) R 1 9 8 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0", procStat{state: 'R', pgrp: 9, session: 8, start: 99}, true},
		{"7 (x) Z 1 2 3", procStat{}, false},
		{"7 x S 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0", procStat{}, false},
		{"7 (x) S 1 2 three 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0", procStat{}, false},
		{"7 (x) SS 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0", procStat{}, false},
	} {
		got, err := parseStat("stat", []byte(tc.line))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v, ok %v", tc.line, got, err, tc.want, tc.ok)
		}
	}
	self := os.Getpid()
	want, err := readStat("/proc", self)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, statMax)
	for range 2 { // the buffer is reused
		if got, err := readStatFile("/proc/"+strconv.Itoa(self)+"/stat", buf); err != nil || got != want {
			t.Fatalf("readStatFile = %+v, %v; readStat's %+v", got, err, want)
		}
	}
	if _, err := readStatFile("/proc/0/stat", buf); err == nil {
		t.Fatal("read /proc/0/stat")
	}
}

// TestReadWhole_ReadsPastItsBufferAndNamesWhatFails: a /proc file read
// with plain system calls comes whole whatever buf's size, a process's
// environment too (the marker scan's read), and a missing file or one
// past the bound fails naming its path.
func TestReadWhole_ReadsPastItsBufferAndNamesWhatFails(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big := strings.Repeat("x", 10000)
	if err := os.WriteFile(filepath.Join(dir, "big"), []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := readWhole(filepath.Join(dir, "big"), make([]byte, 16)); err != nil || string(got) != big {
		t.Fatalf("read %d bytes, %v; want %d", len(got), err, len(big))
	}
	env, err := environ("/proc", strconv.Itoa(os.Getpid()))
	if err != nil || !strings.Contains(string(env), "PATH=") {
		t.Fatalf("this process's environment: %d bytes, %v", len(env), err)
	}
	missing := filepath.Join(dir, "missing")
	if _, err := readWhole(missing, nil); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("a missing file: %v", err)
	}
	huge := filepath.Join(dir, "huge")
	if err := os.WriteFile(huge, make([]byte, procFileMax+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readWhole(huge, nil); err == nil || !strings.Contains(err.Error(), huge) {
		t.Fatalf("a file past the bound: %v", err)
	}
}
