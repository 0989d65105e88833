package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/internal/cputest"
	"github.com/ttkit/ttkit/internal/proctest"
	"github.com/ttkit/ttkit/queued/cpupin"
)

// cpusOf is a task's Cpus_allowed_list; path is its /proc directory.
func cpusOf(t *testing.T, path string) string {
	t.Helper()
	list, err := cputest.Allowed(path)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// queued keeps its own threads to one CPU (TT_DEVICE_DAEMON_CPU, auto
// by default) and hands its jobs every CPU it was started with: the
// first job, started by a helper of its own, and the later ones, started
// by spares its spawner forked.
func TestQueued_KeepsItsThreadsToOneCPUAndNotItsJobs(t *testing.T) {
	t.Parallel()
	ours := cputest.NeedTwo(t)
	all := cpupin.List(ours)
	last := cputest.Last(ours)
	for _, c := range []struct {
		name, env string
		kept      func(string) bool // queued's threads' list
	}{
		{"auto", "", func(l string) bool {
			n, err := strconv.Atoi(l)
			return err == nil && ours.IsSet(n)
		}},
		{"a CPU named", "TT_DEVICE_DAEMON_CPU=" + strconv.Itoa(last), func(l string) bool { return l == strconv.Itoa(last) }},
		{"any", "TT_DEVICE_DAEMON_CPU=any", func(l string) bool { return l == all }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var extra []string
			if c.env != "" {
				extra = append(extra, c.env)
			}
			d := startDaemonWith(t, t.TempDir(), bin, extra...)
			for i := range 3 {
				id := d.queue("0", t.TempDir(), "grep Cpus_allowed_list /proc/self/status")
				d.waitOutput(id, "Cpus_allowed_list:\t"+all+"\n")
				t.Logf("job %d ran on CPUs %s", i, all)
			}
			pid := d.cmd.Process.Pid
			tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
			if err != nil || len(tasks) < 2 {
				t.Fatalf("queued's threads: %v, %v", tasks, err)
			}
			first := cpusOf(t, tasks[0])
			for _, task := range tasks {
				if l := cpusOf(t, task); l != first || !c.kept(l) {
					t.Errorf("queued's thread %s may use CPUs %s (its first %s)", filepath.Base(task), l, first)
				}
			}
			// The C build of queued-exec has a spawner (runner/spawner.go).
			for _, sp := range proctest.ChildrenNamed(pid, "queued-spawn") {
				if l := cpusOf(t, fmt.Sprintf("/proc/%d", sp)); l != all {
					t.Errorf("queued's spawner may use CPUs %s, want %s", l, all)
				}
			}
			kept := strings.Contains(d.stderr.String(), "queued's threads keep to one CPU")
			if kept != (c.name != "any") {
				t.Errorf("queued says it keeps to one CPU: %v; want %v", kept, !kept)
			}
		})
	}
}
