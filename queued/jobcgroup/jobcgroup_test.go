package jobcgroup

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testCgroup creates a cgroup v2 directory below the test's own cgroup and
// removes it at the end. It needs root and a cgroup2 mount with
// cgroup.kill (Linux 5.14); without them it skips, naming what is missing.
func testCgroup(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("creating a cgroup needs root (CI runs as root)")
	}
	own, err := OwnCgroup("/proc/self")
	if err != nil {
		t.Skipf("no cgroup v2 here: %v", err)
	}
	dir := filepath.Join(own, fmt.Sprintf("ttkit-jobcgroup-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "_")))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot create a cgroup under %s: %v", own, err)
	}
	t.Cleanup(func() {
		// Job cgroups first, then dir itself; both are empty by now unless
		// the test failed, in which case kill what is left.
		subs, _ := filepath.Glob(filepath.Join(dir, "*", "cgroup.procs"))
		for _, p := range subs {
			os.WriteFile(filepath.Join(filepath.Dir(p), "cgroup.kill"), []byte("1"), 0)
			waitEmpty(t, filepath.Dir(p))
			os.Remove(filepath.Dir(p))
		}
		os.Remove(dir)
	})
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		t.Skipf("no cgroup.kill (Linux 5.14): %v", err)
	}
	return dir
}

// waitEmpty polls cgroup.events until the cgroup has no process left.
func waitEmpty(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
		if err != nil || strings.Contains(string(b), "populated 0") {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s still populated after 10s", dir)
			return
		}
		time.Sleep(5 * time.Millisecond) // polling the kernel's view
	}
}

// gone polls until pid is no longer a live process (gone or a zombie).
func gone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && len(b) > i+2 && b[i+2] == 'Z' {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive after 10s: %s", pid, b)
		}
		time.Sleep(5 * time.Millisecond) // polling for the process to die
	}
}

// TestJob_KillReachesEscapedProcess: a job's child that left the job's
// process group (setsid) is in the job's cgroup from its first
// instruction, and Kill ends it with the rest; Close removes the cgroup.
func TestJob_KillReachesEscapedProcess(t *testing.T) {
	dir := testCgroup(t)
	m, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	j, err := m.New("42/../x")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(j.Dir()) != dir || !strings.HasPrefix(filepath.Base(j.Dir()), "job-42x.") {
		t.Fatalf("job cgroup %s, want job-42x.* in %s", j.Dir(), dir)
	}
	cmd := exec.Command("/bin/sh", "-c", `setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!; exec sleep 1000`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	j.Place(cmd.SysProcAttr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	escaped, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	procs, err := os.ReadFile(filepath.Join(j.Dir(), "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{cmd.Process.Pid, escaped} {
		if !strings.Contains("\n"+string(procs), fmt.Sprintf("\n%d\n", pid)) {
			t.Fatalf("pid %d not in the job cgroup; cgroup.procs: %q", pid, procs)
		}
	}
	if err := j.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	gone(t, escaped)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(j.Dir()); !os.IsNotExist(err) {
		t.Fatalf("job cgroup still there after Close: %v", err)
	}
}

// TestOpen_EnablesOfferedControllers: each of Controllers that the cgroup
// offers is enabled for the job cgroups, and no other.
func TestOpen_EnablesOfferedControllers(t *testing.T) {
	dir := testCgroup(t)
	m, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	offered, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, c := range Controllers {
		if contains(strings.Fields(string(offered)), c) {
			want = append(want, c)
		}
	}
	if fmt.Sprint(m.Enabled()) != fmt.Sprint(want) {
		t.Fatalf("enabled %v, want %v (offered: %q)", m.Enabled(), want, offered)
	}
	j, err := m.New("1")
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	have, err := os.ReadFile(filepath.Join(j.Dir(), "cgroup.controllers"))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(strings.Fields(string(have))) != fmt.Sprint(want) {
		t.Fatalf("job cgroup has controllers %q, want %v", have, want)
	}
}

// TestOpen_NotACgroup: a directory without cgroup.kill is refused by name.
func TestOpen_NotACgroup(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(dir)
	if err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Open(%s) = %v, want an error naming it", dir, err)
	}
}
