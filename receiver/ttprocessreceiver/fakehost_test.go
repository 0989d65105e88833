package ttprocessreceiver

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/internal/kmdtest"
)

// fakeHost is a KMD driver tree and a procfs tree in a temp dir, for tests
// that need exact PIDs (golden files). Tests of real processes use the real
// /proc instead.
type fakeHost struct {
	t      *testing.T
	driver *kmdtest.Tree
	proc   string
	// cgroup is the fake cgroupfs mount, where a Slurm job's cgroup
	// directory is looked at for its owner.
	cgroup string
}

func newFakeHost(t *testing.T) *fakeHost {
	t.Helper()
	dir := t.TempDir()
	h := &fakeHost{t: t, driver: kmdtest.NewTree(t, filepath.Join(dir, "driver")), proc: filepath.Join(dir, "proc"),
		cgroup: filepath.Join(dir, "cgroup")}
	if err := os.MkdirAll(h.proc, 0o755); err != nil {
		t.Fatal(err)
	}
	// A procfs names the reader's own PID in self: the receiver checks
	// it to know proc_path is of its own PID namespace.
	if err := os.Symlink(strconv.Itoa(ownPID), filepath.Join(h.proc, "self")); err != nil {
		t.Fatal(err)
	}
	return h
}

// process writes /proc/<pid>/{cmdline,comm,stat}. Arguments are joined with
// NULs as the kernel stores them. Files are rewritten in place so a scanner
// holding them open sees the change, as it would for a real PID reuse.
func (h *fakeHost) process(pid int, start uint64, comm string, argv ...string) {
	h.t.Helper()
	dir := filepath.Join(h.proc, strconv.Itoa(pid))
	cmdline := ""
	if len(argv) > 0 {
		cmdline = strings.Join(argv, "\x00") + "\x00"
	}
	stat := fmt.Sprintf("%d (%s) S 1 %d %d 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0", pid, comm, pid, pid, start)
	h.write(filepath.Join(dir, "cmdline"), cmdline)
	h.write(filepath.Join(dir, "comm"), comm+"\n")
	h.write(filepath.Join(dir, "stat"), stat)
}

// selfIs makes the fake procfs's self link name pid: the receiver checks it
// against its own PID (ownPID in tests that set it, os.Getpid() otherwise).
func (h *fakeHost) selfIs(pid int) {
	h.t.Helper()
	link := filepath.Join(h.proc, "self")
	if err := os.Remove(link); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Symlink(strconv.Itoa(pid), link); err != nil {
		h.t.Fatal(err)
	}
}

// pids writes a device's pids file, one line per open file descriptor.
func (h *fakeHost) pids(device int, pids ...int) { h.driver.SetPids(device, pids...) }

// breakPids makes a device's pids file unreadable.
func (h *fakeHost) breakPids(device int) { h.driver.Break(device) }

func (h *fakeHost) write(path, content string) {
	h.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// cgroupDir creates the cgroup directory rel (as /proc/<pid>/cgroup names
// it, under the hierarchy's mount for cgroup v1) in the fake cgroupfs,
// owned by uid, as slurmd (root) or a user's delegated systemd would.
func (h *fakeHost) cgroupDir(rel string, uid int) {
	h.t.Helper()
	dir := filepath.Join(h.cgroup, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Chown(dir, uid, uid); err != nil {
		h.t.Fatal(err)
	}
}
