package jobcgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// SupervisorCgroup is the leaf queued moves itself into inside its
// delegated cgroup. cgroup v2 lets a cgroup enable controllers for its
// children only while it holds no process itself, so queued cannot stay in
// the cgroup its jobs' cgroups are created in.
const SupervisorCgroup = "queued"

// ErrNotDelegated means queued's cgroup was not delegated to it, so it must
// not create cgroups there: systemd owns that cgroup and may move or remove
// what it did not create.
var ErrNotDelegated = errors.New("cgroup not delegated (set Delegate=yes in the unit)")

// ErrNoCgroup2 means the process is in no cgroup v2 hierarchy (a cgroup v1
// system), or that hierarchy is not mounted where it can be seen.
var ErrNoCgroup2 = errors.New("no cgroup v2 hierarchy")

var (
	defaultOnce sync.Once
	defaultMgr  *Manager
	defaultErr  error
)

// DefaultReason says why Default returned nil (nil when it did not):
// status and doctor tell an administrator what jobs are not held by.
func DefaultReason() error {
	Default()
	return defaultErr
}

// Default returns the Manager for queued's own cgroup, set up on the first
// call: when that cgroup is a delegated cgroup v2 directory, queued moves
// itself into its SupervisorCgroup leaf and creates the job cgroups beside
// it. Otherwise it returns nil, and the runner tracks jobs by process group
// alone. Either way it logs once, with slog's default logger, what it
// decided and why. Call it before the first job starts (the runner does):
// the move takes queued, not any job already running, into the leaf.
func Default() *Manager {
	defaultOnce.Do(func() {
		m, err := setup("/proc/self")
		if err != nil {
			defaultErr = err
			slog.Info("jobs are tracked by process group, not by cgroup", "reason", err.Error())
			return
		}
		slog.Info("each job runs in a cgroup of its own", "dir", m.Dir(), "controllers", strings.Join(m.Enabled(), ","))
		defaultMgr = m
	})
	return defaultMgr
}

// setup finds the calling process's cgroup through procSelf (/proc/self),
// checks that it is delegated, moves the process into the supervisor leaf
// and opens the Manager.
func setup(procSelf string) (*Manager, error) {
	dir, err := OwnCgroup(procSelf)
	if err != nil {
		return nil, err
	}
	if !Delegated(dir) {
		return nil, fmt.Errorf("%s: %w", dir, ErrNotDelegated)
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		return nil, fmt.Errorf("no cgroup.kill in %s (Linux 5.14 or later is needed): %w", dir, err)
	}
	leaf := filepath.Join(dir, SupervisorCgroup)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("creating %s: %w", leaf, err)
	}
	procs := filepath.Join(leaf, "cgroup.procs")
	if err := os.WriteFile(procs, []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		return nil, fmt.Errorf("moving queued into %s: %w", procs, err)
	}
	return Open(dir)
}

// Delegated reports whether dir carries the mark systemd puts on the cgroup
// of a unit with Delegate=yes: the extended attribute trusted.delegate
// (set by the system manager) or user.delegate (set by both managers, and
// the only one a user manager can set), with the value "1".
func Delegated(dir string) bool {
	buf := make([]byte, 8)
	for _, name := range []string{"trusted.delegate", "user.delegate"} {
		n, err := syscall.Getxattr(dir, name, buf)
		if err == nil && n == 1 && buf[0] == '1' {
			return true
		}
	}
	return false
}

// OwnCgroup returns the directory of the cgroup v2 the process described by
// procSelf (a /proc/<pid> directory) is in: the "0::" line of its cgroup
// file, under the cgroup2 mount of its mountinfo (/sys/fs/cgroup on a
// unified system, /sys/fs/cgroup/unified on a hybrid one).
func OwnCgroup(procSelf string) (string, error) {
	cgPath := filepath.Join(procSelf, "cgroup")
	b, err := os.ReadFile(cgPath)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", cgPath, err)
	}
	var rel string
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			rel, found = p, true
			break
		}
	}
	if !found {
		return "", fmt.Errorf("%s has no 0:: line: %w", cgPath, ErrNoCgroup2)
	}
	mnt, root, err := cgroup2Mount(filepath.Join(procSelf, "mountinfo"))
	if err != nil {
		return "", err
	}
	// The mount shows the hierarchy from root down; the cgroup file names
	// the cgroup from the hierarchy's top (as seen in this cgroup namespace).
	inner, ok := strings.CutPrefix(rel, root)
	if !ok && root != "/" {
		return "", fmt.Errorf("cgroup %s is outside the cgroup2 mount at %s (root %s): %w", rel, mnt, root, ErrNoCgroup2)
	}
	if !ok {
		inner = rel
	}
	return filepath.Join(mnt, inner), nil
}

// cgroup2Mount returns the mount point and root of the first cgroup2 mount
// listed in a mountinfo file.
func cgroup2Mount(path string) (mnt, root string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// ID parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := bytes.Cut(sc.Bytes(), []byte(" - "))
		if !ok {
			continue
		}
		if fs := strings.Fields(string(post)); len(fs) == 0 || fs[0] != "cgroup2" {
			continue
		}
		f := strings.Fields(string(pre))
		if len(f) < 5 {
			return "", "", fmt.Errorf("parsing %s: short line %q", path, sc.Text())
		}
		return unescape(f[4]), unescape(f[3]), nil
	}
	if err := sc.Err(); err != nil {
		return "", "", fmt.Errorf("reading %s: %w", path, err)
	}
	return "", "", fmt.Errorf("no cgroup2 mount in %s: %w", path, ErrNoCgroup2)
}

// unescape undoes mountinfo's octal escapes (\040 for a space, and so on).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
