package cpupin

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ttkit/ttkit/internal/cputest"
)

// keepEnv makes this test binary a process that applies the setting it
// holds with Keep and reports on stdout what became of its threads.
const keepEnv = "CPUPIN_TEST_KEEP"

// report is what such a process found.
type report struct {
	CPU        int
	Err        string
	Threads    map[string]string // tid → Cpus_allowed_list
	Jobs       string            // JobCPUs, or "" when none
	GOMAXPROCS int
	Before     int // threads when Keep was called
	New        int // threads started after it
}

func TestMain(m *testing.M) {
	if s, ok := os.LookupEnv(keepEnv); ok {
		os.Exit(keepAndReport(s))
	}
	os.Exit(m.Run())
}

// keepAndReport starts threads, applies s, starts more threads, and
// reports every thread's CPUs once they all run.
func keepAndReport(s string) int {
	hold := make(chan struct{})
	defer close(hold)
	threadsUp := func(n int) {
		ready := make(chan struct{})
		for range n {
			go func() {
				runtime.LockOSThread() // a thread of its own, kept
				ready <- struct{}{}
				<-hold
			}()
		}
		for range n {
			<-ready
		}
	}
	threadsUp(3)
	before, _ := threads()
	var r report
	r.Before = len(before)
	cpu, err := Keep(s)
	r.CPU = cpu
	if err != nil {
		r.Err = err.Error()
	}
	// Threads started after Keep inherit: lock goroutines to threads
	// until the runtime has had to start one (it may reuse idle ones).
	known := map[int]bool{}
	for _, tid := range before {
		known[tid] = true
	}
	tids, _ := threads()
	for range 64 {
		for _, tid := range tids {
			if !known[tid] {
				r.New++
			}
		}
		if r.New > 0 {
			break
		}
		threadsUp(1)
		tids, _ = threads()
	}
	r.Threads = map[string]string{}
	for _, tid := range tids {
		r.Threads[fmt.Sprint(tid)], _ = cputest.Allowed(fmt.Sprintf("/proc/self/task/%d", tid))
	}
	if set, ok := JobCPUs(); ok {
		r.Jobs = List(set)
	}
	r.GOMAXPROCS = runtime.GOMAXPROCS(0)
	json.NewEncoder(os.Stdout).Encode(r)
	return 0
}

// keepIn runs this binary as a process that applies setting, started
// with the CPUs of cpus (nil: this process's), and returns its report.
func keepIn(t *testing.T, setting string, cpus *unix.CPUSet) report {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), keepEnv+"="+setting)
	var out []byte
	var err error
	if cpus == nil {
		out, err = cmd.Output()
	} else {
		// A process takes its affinity from the thread that forks it.
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread() // this thread ends with the goroutine
			if err = unix.SchedSetaffinity(0, cpus); err == nil {
				out, err = cmd.Output()
			}
		}()
		<-done
	}
	if err != nil {
		t.Fatalf("the process applying %q: %v\n%s", setting, err, out)
	}
	var r report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("its report %q: %v", out, err)
	}
	return r
}

func TestKeep_EveryThreadBeforeAndAfterGoesToTheCPUNamed(t *testing.T) {
	set := cputest.NeedTwo(t)
	cpu := cputest.Last(set)
	r := keepIn(t, fmt.Sprint(cpu), nil)
	if r.Err != "" || r.CPU != cpu {
		t.Fatalf("Keep(%d) = %d, %q", cpu, r.CPU, r.Err)
	}
	if r.Before < 4 || r.New < 1 {
		t.Fatalf("%d threads before Keep and %d started after; want 4 or more, then one or more", r.Before, r.New)
	}
	for tid, list := range r.Threads {
		if list != fmt.Sprint(cpu) {
			t.Errorf("thread %s may use CPUs %s, want only %d", tid, list, cpu)
		}
	}
	if r.Jobs != List(set) {
		t.Errorf("JobCPUs = %q, want the CPUs it started with, %q", r.Jobs, List(set))
	}
	if r.GOMAXPROCS != runtime.GOMAXPROCS(0) {
		t.Errorf("GOMAXPROCS %d once kept to one CPU, want %d as before", r.GOMAXPROCS, runtime.GOMAXPROCS(0))
	}
}

func TestKeep_AutoTakesACPUItMayUse(t *testing.T) {
	set := cputest.NeedTwo(t)
	r := keepIn(t, Auto, nil)
	if r.Err != "" || r.CPU < 0 || !set.IsSet(r.CPU) {
		t.Fatalf("Keep(auto) = %d, %q; want one of %s", r.CPU, r.Err, List(set))
	}
	for tid, list := range r.Threads {
		if list != fmt.Sprint(r.CPU) {
			t.Errorf("thread %s may use CPUs %s, want only %d", tid, list, r.CPU)
		}
	}
	if r.Jobs != List(set) {
		t.Errorf("JobCPUs = %q, want %q", r.Jobs, List(set))
	}
}

func TestKeep_AnyLeavesEveryThreadAlone(t *testing.T) {
	set := cputest.NeedTwo(t)
	r := keepIn(t, Any, nil)
	if r.Err != "" || r.CPU != -1 || r.Jobs != "" {
		t.Fatalf("Keep(any) = %d, %q, jobs %q; want -1, no error, no CPUs to hand on", r.CPU, r.Err, r.Jobs)
	}
	for tid, list := range r.Threads {
		if list != List(set) {
			t.Errorf("thread %s may use CPUs %s, want %s", tid, list, List(set))
		}
	}
}

func TestKeep_OneCPUIsLeftAlone(t *testing.T) {
	set := cputest.Ours(t)
	var one unix.CPUSet
	one.Set(cputest.Last(set))
	r := keepIn(t, Auto, &one)
	if r.Err != "" || r.CPU != -1 || r.Jobs != "" {
		t.Fatalf("Keep(auto) on one CPU = %d, %q, jobs %q; want -1, no error, nothing to hand on", r.CPU, r.Err, r.Jobs)
	}
}

func TestKeep_ACPUItMayNotUseIsRefusedByNumber(t *testing.T) {
	set := cputest.NeedTwo(t)
	first := cputest.First(set)
	var one unix.CPUSet
	one.Set(first)
	other := cputest.Last(set)
	r := keepIn(t, fmt.Sprint(other), &one)
	want := fmt.Sprintf("CPU %d is not one queued may use (%d)", other, first)
	if r.CPU != -1 || r.Err != want {
		t.Errorf("Keep(%d) started on CPU %d = %d, %q; want -1, %q", other, first, r.CPU, r.Err, want)
	}
	for tid, list := range r.Threads {
		if list != fmt.Sprint(first) {
			t.Errorf("thread %s may use CPUs %s after the refusal, want %d as it started", tid, list, first)
		}
	}
	r = keepIn(t, "5000", nil)
	if r.CPU != -1 || !strings.Contains(r.Err, "CPU 5000 is not one queued may use ("+List(set)+")") {
		t.Errorf("Keep(5000) = %d, %q", r.CPU, r.Err)
	}
}

func TestCheckSetting(t *testing.T) {
	for _, s := range []string{"auto", "any", "0", "3", "127"} {
		if err := CheckSetting(s); err != nil {
			t.Errorf("CheckSetting(%q) = %v", s, err)
		}
	}
	for _, s := range []string{"", "-1", "one", "1.5", " 1", "0x1", "Auto", "0-3"} {
		err := CheckSetting(s)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
			t.Errorf("CheckSetting(%q) = %v, want an error naming it", s, err)
		}
	}
}

func TestList(t *testing.T) {
	set := func(cpus ...int) unix.CPUSet {
		var s unix.CPUSet
		for _, c := range cpus {
			s.Set(c)
		}
		return s
	}
	for _, c := range []struct {
		set  unix.CPUSet
		want string
	}{
		{set(), ""},
		{set(0), "0"},
		{set(0, 1, 2, 3), "0-3"},
		{set(0, 1, 2, 3, 6), "0-3,6"},
		{set(1, 3, 5), "1,3,5"},
		{set(62, 63, 64, 65, 1023), "62-65,1023"},
	} {
		if got := List(c.set); got != c.want {
			t.Errorf("List(%v) = %q, want %q", c.set, got, c.want)
		}
	}
}
