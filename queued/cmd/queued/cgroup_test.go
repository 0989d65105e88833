package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/jobcgroup"
)

// delegatedCgroup creates a cgroup v2 directory under the test's own
// cgroup, marked the way systemd marks the cgroup of a unit with
// Delegate=yes (trusted.delegate=1), and a wrapper that moves itself into
// it and then execs queued: queued starts as it does under systemd. At the
// end everything left in the cgroup is killed and the cgroups removed. It
// needs root and a cgroup2 mount with cgroup.kill; without them it skips,
// naming what is missing.
func delegatedCgroup(t *testing.T) (dir, wrapper string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("creating a cgroup needs root (CI runs as root)")
	}
	own, err := jobcgroup.OwnCgroup("/proc/self")
	if err != nil {
		t.Skipf("no cgroup v2 here: %v", err)
	}
	dir = filepath.Join(own, fmt.Sprintf("ttkit-queued-test-%d-%s", os.Getpid(), t.Name()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot create a cgroup under %s: %v", own, err)
	}
	t.Cleanup(func() { removeCgroupTree(t, dir) })
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		t.Skipf("no cgroup.kill (Linux 5.14): %v", err)
	}
	if err := syscall.Setxattr(dir, "trusted.delegate", []byte("1"), 0); err != nil {
		t.Fatalf("marking %s delegated: %v", dir, err)
	}
	wrapper = filepath.Join(t.TempDir(), "queued-in-cgroup")
	script := fmt.Sprintf("#!/bin/sh\necho $$ > %s/cgroup.procs || exit 1\nexec %s \"$@\"\n", dir, bin)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, wrapper
}

// removeCgroupTree kills every process under dir and removes its cgroups,
// deepest first.
func removeCgroupTree(t *testing.T, dir string) {
	os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
		if err != nil || strings.Contains(string(b), "populated 0") {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("cgroup %s still populated after 10s", dir)
			return
		}
		time.Sleep(5 * time.Millisecond) // polling for the kill to land
	}
	var dirs []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		os.Remove(dirs[i])
	}
}

// logsOf returns a job's whole output so far.
func (d *daemon) logsOf(id string) string {
	d.t.Helper()
	ch, err := d.client.Logs(ctx(d.t), id, api.LogsQuery{})
	if err != nil {
		d.t.Fatal(err)
	}
	return string(ch.Data)
}

// waitGone polls until pid is no longer a live process.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive 10s after its job ended", pid)
		}
		time.Sleep(5 * time.Millisecond) // polling for the process to die
	}
}

// TestQueued_JobCgroupKillsWholeJob: under a delegated cgroup, queued moves
// itself into its "queued" leaf and runs each job in a cgroup of its own;
// killing a job ends even the process that left its process group
// (setsid), while the other card's job runs on.
func TestQueued_JobCgroupKillsWholeJob(t *testing.T) {
	dir, wrapper := delegatedCgroup(t)
	state, work := t.TempDir(), t.TempDir()
	d := startDaemonWith(t, state, wrapper)

	other := d.queue("1", work, "echo started; sleep 1000")
	job := d.queue("0", work, `setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo "escaped $!"; echo "cgroup $(grep ^0:: /proc/self/cgroup)"; sleep 1000`)
	d.waitOutput(other, "started")
	d.waitOutput(job, "cgroup ")
	out := d.logsOf(job)

	m := regexp.MustCompile(`cgroup 0::(\S+)`).FindStringSubmatch(out)
	if m == nil || filepath.Base(filepath.Dir(m[1])) != filepath.Base(dir) || !strings.HasPrefix(filepath.Base(m[1]), "job-") {
		t.Fatalf("the job's cgroup is not a job-* cgroup of %s:\n%s", dir, out)
	}
	procs, err := os.ReadFile(filepath.Join(dir, jobcgroup.SupervisorCgroup, "cgroup.procs"))
	if err != nil || !strings.Contains("\n"+string(procs), fmt.Sprintf("\n%d\n", d.cmd.Process.Pid)) {
		t.Fatalf("queued (pid %d) is not in its leaf %s: %q, %v", d.cmd.Process.Pid, jobcgroup.SupervisorCgroup, procs, err)
	}
	em := regexp.MustCompile(`escaped (\d+)`).FindStringSubmatch(out)
	if em == nil {
		t.Fatalf("no escaped pid in the output:\n%s", out)
	}
	escaped, _ := strconv.Atoi(em[1])

	if _, err := d.client.Kill(ctx(t), job); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.WaitResult(ctx(t), job); err != nil {
		t.Fatal(err)
	}
	waitGone(t, escaped)

	if r, err := d.client.Job(ctx(t), other); err != nil || r.State != "running" {
		t.Fatalf("card 1's job after card 0's was killed: %+v, %v", r, err)
	}
	if !strings.Contains(d.stderr.String(), "each job runs in a cgroup of its own") {
		t.Fatalf("queued did not log that jobs get cgroups:\n%s", d.stderr.String())
	}
}

// TestQueued_OOMKilledJobLeavesQueuedAndOtherCard: a job that exceeds the
// memory limit of its own cgroup is killed by the kernel's OOM killer, as a
// whole (memory.oom.group), and nothing else is: queued keeps serving, the
// other card's job runs on, and the next job on the same card runs.
func TestQueued_OOMKilledJobLeavesQueuedAndOtherCard(t *testing.T) {
	dir, wrapper := delegatedCgroup(t)
	offered, _ := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if !slices.Contains(strings.Fields(string(offered)), "memory") {
		t.Skipf("the memory controller is not available to cgroup v2 children here (cgroup.controllers of %s: %q): "+
			"on a hybrid cgroup v1/v2 host it is bound to v1, and it must be enabled in every ancestor's cgroup.subtree_control; "+
			"queued/jobcgroup/vmtest.sh runs this test in a VM that has it", dir, strings.TrimSpace(string(offered)))
	}
	state, work := t.TempDir(), t.TempDir()
	d := startDaemonWith(t, state, wrapper)

	other := d.queue("1", work, "echo started; sleep 1000")
	d.waitOutput(other, "started")
	// The job limits its own cgroup to 32 MiB without swap, then buffers
	// 1 GiB (tail keeps its whole input, which has no newline).
	hog := d.queue("0", work, fmt.Sprintf(`cg=%s/$(basename $(sed -n 's/^0:://p' /proc/self/cgroup)); `+
		`echo 32M > $cg/memory.max && echo limited; echo 0 > $cg/memory.swap.max 2>/dev/null; `+
		`head -c 1073741824 /dev/zero | tail; echo "survived $?"`, dir))
	r, err := d.client.WaitResult(ctx(t), hog)
	if err != nil {
		t.Fatal(err)
	}
	out := d.logsOf(hog)
	if !strings.Contains(out, "limited") || strings.Contains(out, "survived") || r.ExitCode == nil || *r.ExitCode != -int(syscall.SIGKILL) {
		t.Fatalf("the hog ended %+v (exit %v), want the whole job SIGKILLed by the OOM killer; output:\n%s", r, r.ExitCode, out)
	}

	if r, err := d.client.Job(ctx(t), other); err != nil || r.State != "running" {
		t.Fatalf("card 1's job after card 0's OOM kill: %+v, %v", r, err)
	}
	select {
	case <-d.exited:
		t.Fatalf("queued exited:\n%s", d.stderr.String())
	default:
	}
	next := d.queue("0", work, "echo after")
	if r, err := d.client.WaitResult(ctx(t), next); err != nil || *r.ExitCode != 0 {
		t.Fatalf("the next job on card 0: %+v, %v", r, err)
	}
}

// TestQueued_JobCgroupTasksMax: with TT_DEVICE_JOB_TASKS_MAX each job's
// cgroup gets that pids.max, so a job that forks without end (on a shared
// host, one user's fork bomb) runs out of tasks inside its own cgroup
// while queued, which needs threads of its own, and the other card's job
// go on.
func TestQueued_JobCgroupTasksMax(t *testing.T) {
	dir, wrapper := delegatedCgroup(t)
	offered, _ := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if !slices.Contains(strings.Fields(string(offered)), "pids") {
		t.Skipf("the pids controller is not available to cgroup v2 children here (cgroup.controllers of %s: %q); "+
			"queued/jobcgroup/vmtest.sh runs this test in a VM that has it", dir, strings.TrimSpace(string(offered)))
	}
	state, work := t.TempDir(), t.TempDir()
	d := startDaemonWith(t, state, wrapper, "TT_DEVICE_JOB_TASKS_MAX=8")
	other := d.queue("1", work, "echo started; sleep 1000")
	d.waitOutput(other, "started")
	// The forks happen in a subshell, which a failed fork ends; the rest
	// uses builtins only, since no fork is left to the job then. Its
	// sleeps end with it (the runner kills the job's group).
	bomb := d.queue("0", work, `cg=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup); echo "max $(cat $cg/pids.max)"; `+
		`( i=0; while [ $i -lt 30 ]; do sleep 1000 & i=$((i+1)); done ); read n < $cg/pids.current; echo "current $n"; exit 0`)
	if _, err := d.client.WaitResult(ctx(t), bomb); err != nil {
		t.Fatal(err)
	}
	out := d.logsOf(bomb)
	m := regexp.MustCompile(`current (\d+)`).FindStringSubmatch(out)
	if !strings.Contains(out, "max 8\n") || m == nil {
		t.Fatalf("the job's cgroup is not limited to 8 tasks:\n%s", out)
	}
	if n, _ := strconv.Atoi(m[1]); n > 8 {
		t.Errorf("the job has %d tasks, over its limit of 8", n)
	}
	if r, err := d.client.Job(ctx(t), other); err != nil || r.State != "running" {
		t.Fatalf("card 1's job after card 0's ran out of tasks: %+v, %v", r, err)
	}
	next := d.queue("0", work, "echo after")
	if r, err := d.client.WaitResult(ctx(t), next); err != nil || *r.ExitCode != 0 {
		t.Fatalf("the next job on card 0: %+v, %v", r, err)
	}
}
