// Package jobcgroup gives every job queued runs a cgroup v2 sub-cgroup of
// its own, when queued's cgroup has been delegated to it (systemd's
// Delegate=yes). A job's cgroup holds every process the job starts, even one
// that left the job's process group with setsid, so:
//
//   - the job can be killed as a whole tree (cgroup.kill), leaving nothing
//     behind that still holds the card;
//   - its memory is accounted on its own (memory.current, memory.peak) and a
//     memory limit on it makes the kernel's OOM killer pick a process of
//     that job, never queued or another card's job;
//   - systemd-cgls and systemctl status show which process belongs to which
//     job.
//
// Where there is no delegated cgroup v2 (cgroup v1, no Delegate=yes, a
// kernel before 5.14) the package reports why once and the runner keeps
// tracking jobs by process group, as it always did.
package jobcgroup

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Controllers are the controllers a Manager enables for the job cgroups
// when its cgroup offers them: memory for per-job accounting and OOM
// containment, pids for a per-job view of how many tasks a job has and
// its limit (TT_DEVICE_JOB_TASKS_MAX).
var Controllers = []string{"memory", "pids"}

// removeTimeout bounds how long Job.Close waits for a killed job's
// processes to be gone before it leaves the empty-to-be cgroup behind.
const removeTimeout = 2 * time.Second

// Manager creates the job cgroups under one cgroup directory.
type Manager struct {
	dir         string
	controllers []string
	seq         atomic.Uint64
}

// Open manages job cgroups under dir, a cgroup v2 directory the caller may
// write to and that holds no process of its own (queued moves itself into
// a sibling leaf first; see Default). It enables those of Controllers that
// dir offers for its children, so each job gets them; one it cannot enable
// is left off, which only loses that accounting. (Job cgroups a crashed
// queued left behind go with the unit's cgroup: systemd kills and removes
// the whole tree when the unit stops, before restarting it.)
func Open(dir string) (*Manager, error) {
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		return nil, fmt.Errorf("no cgroup.kill in %s (cgroup v2 on Linux 5.14 or later is needed): %w", dir, err)
	}
	m := &Manager{dir: dir}
	avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(dir, "cgroup.controllers"), err)
	}
	have := strings.Fields(string(avail))
	for _, c := range Controllers {
		if !contains(have, c) {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+c), 0); err == nil {
			m.controllers = append(m.controllers, c)
		}
	}
	return m, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Dir is the cgroup directory the job cgroups are created in.
func (m *Manager) Dir() string { return m.dir }

// Enabled lists the controllers each job cgroup has (a subset of
// Controllers).
func (m *Manager) Enabled() []string { return append([]string(nil), m.controllers...) }

// Job is the cgroup of one running program.
type Job struct {
	dir  string
	fd   *os.File
	pids bool // the pids controller is enabled for it
}

// New creates a job cgroup named after name (characters other than
// letters, digits, '-' and '_' are dropped), queued's PID and a sequence
// number, so two runs of one job never share a cgroup. A nil Manager returns a nil Job,
// whose methods do nothing: the caller need not check.
func (m *Manager) New(name string) (*Job, error) {
	if m == nil {
		return nil, nil
	}
	dir := filepath.Join(m.dir, fmt.Sprintf("%s%d.%d", namePrefix(name), os.Getpid(), m.seq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating job cgroup: %w", err)
	}
	if contains(m.controllers, "memory") {
		// When the kernel OOM-kills in this cgroup (its memory.max, or one
		// set on it by the job), it kills the whole job at once rather than
		// one process of it, so no half of a job keeps the card.
		os.WriteFile(filepath.Join(dir, "memory.oom.group"), []byte("1"), 0)
	}
	fd, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		os.Remove(dir)
		return nil, fmt.Errorf("opening job cgroup: %w", err)
	}
	return &Job{dir: dir, fd: fd, pids: contains(m.controllers, "pids")}, nil
}

// namePrefix is how the cgroup of a job named name begins: "job-", the
// name without the characters New drops, and a dot.
func namePrefix(name string) string {
	return "job-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return -1
	}, name) + "."
}

// IsJobCgroup reports whether the cgroup path p (as /proc/<pid>/cgroup
// gives it) is one New made for the job named name (non-empty): its last
// element is that job's cgroup name. The scheduler asks it of a job
// leader's own cgroup, which only queued could have put it in, to know
// the job's cgroup without the runner telling it.
func IsJobCgroup(p, name string) bool {
	if name == "" {
		return false
	}
	base := path.Base(p)
	rest, ok := strings.CutPrefix(base, namePrefix(name))
	if !ok {
		return false
	}
	// <queued's pid>.<sequence number>
	pid, seq, ok := strings.Cut(rest, ".")
	return ok && isDigits(pid) && isDigits(seq)
}

// isDigits reports a non-empty run of ASCII digits.
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Has reports whether the job cgroups get controller (see Controllers); a
// nil Manager has none.
func (m *Manager) Has(controller string) bool {
	return m != nil && contains(m.controllers, controller)
}

// ErrNoController means a limit needs a controller the job cgroups do not
// have.
var ErrNoController = errors.New("controller not enabled for the job cgroups")

// LimitTasks caps the job at n tasks (processes and threads: pids.max), so
// a job that forks without end runs out inside its own cgroup rather than
// taking what queued and the other jobs need. A nil Job (no delegated
// cgroup) has nothing to limit.
func (j *Job) LimitTasks(n int) error {
	if j == nil {
		return nil
	}
	if !j.pids {
		return fmt.Errorf("pids.max of %s: %w", j.dir, ErrNoController)
	}
	path := filepath.Join(j.dir, "pids.max")
	if err := os.WriteFile(path, []byte(strconv.Itoa(n)), 0); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// NameFromEnv returns the value of key in env (NAME=value entries), the
// name New gives a job's cgroup; "" when key is absent.
func NameFromEnv(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// Dir is the job cgroup's directory, where memory.current, memory.events
// and cgroup.procs of the job are read.
func (j *Job) Dir() string {
	if j == nil {
		return ""
	}
	return j.dir
}

// Place makes a process started with attr begin life inside the job
// cgroup (clone3 with CLONE_INTO_CGROUP), so not even its first
// instruction runs outside it and no child can escape in between.
func (j *Job) Place(attr *syscall.SysProcAttr) {
	if j == nil {
		return
	}
	attr.UseCgroupFD = true
	attr.CgroupFD = int(j.fd.Fd())
}

// Kill SIGKILLs every process in the job cgroup at once, wherever in the
// job's process tree it is and whatever its process group.
func (j *Job) Kill() error {
	if j == nil {
		return nil
	}
	path := filepath.Join(j.dir, "cgroup.kill")
	if err := os.WriteFile(path, []byte("1"), 0); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// ErrBusy means a job cgroup still held processes when Close gave up
// removing it.
var ErrBusy = errors.New("job cgroup still has processes")

// Close kills what is left in the job cgroup and removes it once it is
// empty, waiting at most two seconds for the processes to die.
func (j *Job) Close() error {
	if j == nil {
		return nil
	}
	j.fd.Close()
	deadline := time.Now().Add(removeTimeout)
	for {
		err := os.Remove(j.dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			return fmt.Errorf("removing job cgroup: %w", err)
		}
		j.Kill()
		if time.Now().After(deadline) {
			return fmt.Errorf("removing %s: %w", j.dir, ErrBusy)
		}
		time.Sleep(5 * time.Millisecond) // SIGKILLed processes take a moment to leave
	}
}
