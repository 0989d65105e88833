package jobcgroup

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// fakeProc writes a /proc/<pid> directory with the given cgroup and
// mountinfo files.
func fakeProc(t *testing.T, cgroup, mountinfo string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cgroup), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mountinfo"), []byte(mountinfo), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestOwnCgroup(t *testing.T) {
	const unified = "24 1 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n"
	const hybrid = "30 24 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n" +
		"31 30 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n" +
		"41 30 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
	const unit = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/queued.service\n"
	for _, tc := range []struct {
		name, cgroup, mountinfo, want string
		err                           error
	}{
		{"unified", unit, unified, "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/queued.service", nil},
		{"hybrid", "4:memory:/x\n" + unit, hybrid, "/sys/fs/cgroup/unified/user.slice/user-1000.slice/user@1000.service/app.slice/queued.service", nil},
		{"container root", "0::/\n", unified, "/sys/fs/cgroup", nil},
		{"mount of a subtree", "0::/system.slice/a.service/sub\n",
			"24 1 0:22 /system.slice/a.service /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "/sys/fs/cgroup/sub", nil},
		{"escaped mount point", "0::/q\n", `24 1 0:22 / /mnt/cg\040two rw - cgroup2 cgroup2 rw` + "\n", "/mnt/cg two/q", nil},
		{"cgroup v1 only", "4:memory:/x\n1:name=systemd:/x\n", unified, "", ErrNoCgroup2},
		{"no cgroup2 mount", unit, "30 24 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n", "", ErrNoCgroup2},
		{"outside the mount", "0::/other\n", "24 1 0:22 /system.slice /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "", ErrNoCgroup2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := OwnCgroup(fakeProc(t, tc.cgroup, tc.mountinfo))
			if !errors.Is(err, tc.err) || got != tc.want {
				t.Fatalf("OwnCgroup = %q, %v; want %q, %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestOwnCgroup_MissingFiles(t *testing.T) {
	if _, err := OwnCgroup(filepath.Join(t.TempDir(), "nope")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want one wrapping ErrNotExist", err)
	}
}

// TestSetup_NotDelegated: a cgroup without systemd's delegation mark is
// left alone; the reason names the cgroup and the unit setting.
func TestSetup_NotDelegated(t *testing.T) {
	cg := t.TempDir() // an ordinary directory: no delegate xattr
	proc := fakeProc(t, "0::/\n", "24 1 0:22 / "+cg+" rw - cgroup2 cgroup2 rw\n")
	_, err := setup(proc)
	if !errors.Is(err, ErrNotDelegated) {
		t.Fatalf("setup = %v, want ErrNotDelegated", err)
	}
	if entries, _ := os.ReadDir(cg); len(entries) != 0 {
		t.Fatalf("setup created %v in a cgroup not delegated to it", entries)
	}
}

func TestNameFromEnv(t *testing.T) {
	env := []string{"A=1", "TT_QUEUE_JOB_ID=42", "TT_QUEUE_JOB_ID_X=no"}
	if got := NameFromEnv(env, "TT_QUEUE_JOB_ID"); got != "42" {
		t.Fatalf("NameFromEnv = %q, want 42", got)
	}
	if got := NameFromEnv(env, "B"); got != "" {
		t.Fatalf("NameFromEnv of a missing key = %q", got)
	}
}

// A nil Manager and a nil Job are the fallback: every method is a no-op.
func TestNil(t *testing.T) {
	var m *Manager
	j, err := m.New("1")
	if j != nil || err != nil {
		t.Fatalf("nil Manager New = %v, %v", j, err)
	}
	if j.Kill() != nil || j.Close() != nil || j.Dir() != "" {
		t.Fatal("nil Job methods did something")
	}
}
