package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeProc is a /proc tree in a temporary directory: the PID counters
// and, for each pid, a stat line in session sid started at tick start.
type fakeProc struct {
	root string
	t    *testing.T
}

func newFakeProc(t *testing.T, lastPID, pidMax int, forks uint64, tasks int) *fakeProc {
	t.Helper()
	p := &fakeProc{root: t.TempDir(), t: t}
	p.write("sys/kernel/pid_max", fmt.Sprintf("%d\n", pidMax))
	p.setCounters(lastPID, forks)
	p.write("loadavg", fmt.Sprintf("0.10 0.20 0.30 1/%d %d\n", tasks, lastPID))
	return p
}

func (p *fakeProc) write(name, text string) {
	p.t.Helper()
	path := filepath.Join(p.root, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// setCounters sets the last PID handed out and the forks since boot.
func (p *fakeProc) setCounters(lastPID int, forks uint64) {
	p.write("sys/kernel/ns_last_pid", fmt.Sprintf("%d\n", lastPID))
	p.write("stat", fmt.Sprintf("cpu  1 2 3 4 5 6 7 0 0 0\nctxt 99\nbtime 1\nprocesses %d\nprocs_running 1\nprocs_blocked 0\n", forks))
}

func (p *fakeProc) proc(pid, sid int, start uint64) {
	p.write(fmt.Sprintf("%d/stat", pid), fmt.Sprintf("%d (sleep) S 1 %d %d 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", pid, pid, sid, start))
}

// The sweep after a job looks only at the PIDs the kernel handed out
// since the job's leader (a job's process can have no other), across the
// wrap at pid_max: a process in the leader's session outside that window
// cannot exist, so the fake one here shows the window was applied.
func TestScanJob_LooksOnlyAtPIDsHandedOutSinceTheLeader(t *testing.T) {
	const leader = 32700
	p := newFakeProc(t, leader-5, 32768, 1000, 200)
	clock := readPIDClock(p.root)
	p.setCounters(400, 1500) // the counter wrapped at pid_max since
	for _, pid := range []int{500, 32000, leader, 32750, 350} {
		p.proc(pid, leader, 10)
	}
	tr := trace{sid: leader, started: 10, win: windowSince(p.root, leader, clock)}
	if tr.win == nil {
		t.Fatal("no window for 500 forks on a pid_max of 32768")
	}
	got := scanJob(p.root, tr, 1)
	slices.Sort(got)
	if want := []int{350, 32750}; !slices.Equal(got, want) {
		t.Fatalf("scanJob took %v; want %v (only the pids since the leader's)", got, want)
	}
}

// Where the counters cannot bound the window (so many forks since the
// leader that the PIDs may have gone all the way round, counters that
// cannot be read, a pid_max lowered since), the sweep looks at every
// process, as it always did.
func TestScanJob_WithoutABoundLooksAtEveryProcess(t *testing.T) {
	const leader = 20000
	for name, change := range map[string]func(p *fakeProc){
		"gone round":      func(p *fakeProc) { p.setCounters(20100, 1000+20000) },
		"no counter":      func(p *fakeProc) { os.Remove(filepath.Join(p.root, "sys/kernel/ns_last_pid")) },
		"pid_max lowered": func(p *fakeProc) { p.write("sys/kernel/pid_max", "4096\n") },
		"forks went back": func(p *fakeProc) { p.setCounters(20100, 10) },
	} {
		t.Run(name, func(t *testing.T) {
			p := newFakeProc(t, leader-1, 32768, 1000, 200)
			clock := readPIDClock(p.root)
			p.setCounters(20100, 1050)
			p.proc(500, leader, 10)
			p.proc(20050, leader, 10)
			change(p)
			tr := trace{sid: leader, started: 10, win: windowSince(p.root, leader, clock)}
			if tr.win != nil {
				t.Fatalf("window %+v; want none", *tr.win)
			}
			got := scanJob(p.root, tr, 1)
			slices.Sort(got)
			if want := []int{500, 20050}; !slices.Equal(got, want) {
				t.Fatalf("scanJob took %v; want %v", got, want)
			}
		})
	}
}

// A window small enough to try its PIDs one by one (see probeMax) takes
// the same processes as the listing of /proc, across the wrap too.
func TestScanJob_SmallWindowTriesItsPIDs(t *testing.T) {
	for _, tc := range []struct {
		name        string
		leader, hi  int
		procs, want []int
	}{
		{"plain", 1000, 1100, []int{999, 1050, 1100, 1101}, []int{1050, 1100}},
		{"wrapped", 32760, 50, []int{32759, 32765, 10, 51}, []int{10, 32765}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFakeProc(t, tc.leader-1, 32768, 1000, 200)
			clock := readPIDClock(p.root)
			p.setCounters(tc.hi, 1100)
			for _, pid := range tc.procs {
				p.proc(pid, tc.leader, 10)
			}
			tr := trace{sid: tc.leader, started: 10, win: windowSince(p.root, tc.leader, clock)}
			if _, ok := tr.win.names(); !ok {
				t.Fatalf("window %+v is not tried PID by PID", tr.win)
			}
			got := scanJob(p.root, tr, 1)
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("scanJob took %v; want %v", got, tc.want)
			}
		})
	}
}

// On a host with many CPUs and interrupts /proc/stat runs to tens of
// kilobytes before its "processes" line; the window still holds there.
func TestScanJob_WindowOnAHostWithALongProcStat(t *testing.T) {
	const leader = 1000
	p := newFakeProc(t, leader-1, 32768, 1000, 200)
	long := func(forks int) string {
		return "cpu  1 2 3\nintr 1" + strings.Repeat(" 0", 60000) + fmt.Sprintf("\nctxt 9\nprocesses %d\nprocs_running 1\n", forks)
	}
	p.write("stat", long(1000))
	clock := readPIDClock(p.root)
	p.write("sys/kernel/ns_last_pid", "1010\n")
	p.write("stat", long(1020))
	p.proc(999, leader, 10)
	p.proc(1005, leader, 10)
	tr := trace{sid: leader, started: 10, win: windowSince(p.root, leader, clock)}
	if tr.win == nil {
		t.Fatal("no window with a /proc/stat of 120 kB")
	}
	if got := scanJob(p.root, tr, 1); !slices.Equal(got, []int{1005}) {
		t.Fatalf("scanJob took %v; want [1005]", got)
	}
}

// A start takes the PID clock read last, by a start or by a sweep, while
// it is younger than clockReuse, instead of reading /proc again; an
// older clock is read afresh. A reused clock is older than the start,
// so it bounds the window only more loosely: enough forks since it
// still leave no window (the sweep looks at every process).
func TestPIDClock_AStartTakesTheClockReadLast(t *testing.T) {
	const leader = 20000
	p := newFakeProc(t, leader-1, 32768, 1000, 200)
	first := readPIDClock(p.root)
	if !first.ok || first.forks != 1000 || first.tasks != 200 || first.pidMax != 32768 {
		t.Fatalf("clock %+v; want 1000 forks, 200 tasks, pid_max 32768", first)
	}
	p.setCounters(leader+10, 1100)
	p.write("loadavg", "0.10 0.20 0.30 1/300 20010\n")
	if c := readPIDClock(p.root); c != first {
		t.Fatalf("clock read again within clockReuse: %+v; want the one read before, %+v", c, first)
	}
	// A sweep's reading (its forks, then the tasks alive) is the next
	// start's clock.
	if w := windowSince(p.root, leader, first); w == nil || w.lo != leader || w.hi != leader+10 {
		t.Fatalf("window %+v; want (%d, %d]", w, leader, leader+10)
	}
	if c := readPIDClock(p.root); c.forks != 1100 || c.tasks != 300 || !c.ok {
		t.Fatalf("clock after a sweep: %+v; want the sweep's 1100 forks and 300 tasks", c)
	}
	// Another /proc's clock is never taken, nor does it displace this one.
	other := newFakeProc(t, 100, 32768, 5, 7)
	if c := readPIDClock(other.root); c.forks != 5 || c.tasks != 7 {
		t.Fatalf("clock of another /proc: %+v; want its own", c)
	}
	if c := readPIDClock(p.root); c.forks != 1100 {
		t.Fatalf("clock after another /proc's: %+v; want the sweep's still", c)
	}
	// Too old, it is read afresh.
	lastClocks.Store(p.root, &stampedClock{c: first, at: time.Now().Add(-2 * clockReuse)})
	p.setCounters(leader+20, 1200)
	if c := readPIDClock(p.root); c.forks != 1200 {
		t.Fatalf("clock after clockReuse: %+v; want one read afresh (1200 forks)", c)
	}
	// A reused clock bounds no window once the forks since it could have
	// taken the PIDs all the way round.
	lastClocks.Store(p.root, &stampedClock{c: first, at: time.Now()})
	c := readPIDClock(p.root)
	p.setCounters(leader+30, 1000+20000)
	if w := windowSince(p.root, leader, c); w != nil {
		t.Fatalf("window %+v after 20000 forks since the clock; want none", *w)
	}
}
