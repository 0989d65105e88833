// Package cpupin keeps queued's own threads on one CPU while its jobs
// keep every CPU queued was started with (TT_DEVICE_DAEMON_CPU).
//
// Between two jobs queued's threads hand work to each other a few dozen
// times: a job's exit wakes the wait on its pidfd, which wakes the
// worker, which wakes the commit, the sweep and the spare's refill. On
// two CPUs each of those hand-offs can cross to the other CPU, and on a
// virtual machine a wakeup across CPUs leaves the guest (an
// inter-processor interrupt, and the idle CPU's halt). With every thread
// of queued on one CPU the hand-offs stay on it: on our 2-CPU machines
// queued's CPU a job in a drain fell to 0.74 of what it was, the drain
// and the dispatch unchanged (issue 41, docs/queue-wakeups.md).
//
// A job must not inherit that: a process takes its affinity from the
// thread that forked it, so every helper is handed the CPUs queued
// started with (JobCPUs) and sets them on itself before its execve.
package cpupin

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The settings of TT_DEVICE_DAEMON_CPU besides a CPU's number.
const (
	// Auto keeps queued to the CPU it started on, when it may use two or
	// more: the kernel started it on one it found idle, and queued
	// daemons of several users, started at different times, spread.
	Auto = "auto"
	// Any leaves queued's threads on every CPU it may use.
	Any = "any"
)

// started is the CPUs this process could use when it started, read
// before anything could change them; startErr is why they could not be
// read (a host with more CPUs than unix.CPUSet holds, say), which leaves
// queued unpinned.
var started, startErr = func() (unix.CPUSet, error) {
	var set unix.CPUSet
	err := unix.SchedGetaffinity(0, &set)
	return set, err
}()

// pinned says whether queued's threads may be kept to one CPU: what
// JobCPUs reads.
var pinned atomic.Bool

// CheckSetting says whether s is a setting of TT_DEVICE_DAEMON_CPU: auto,
// any, or a CPU's number. Whether that CPU is one queued may use is
// known only where it runs (Keep).
func CheckSetting(s string) error {
	if s == Auto || s == Any {
		return nil
	}
	if _, err := cpuNumber(s); err != nil {
		return err
	}
	return nil
}

func cpuNumber(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a CPU's number, %s or %s", s, Auto, Any)
	}
	return n, nil
}

// Keep applies the setting s to this process: it keeps every thread on
// the CPU s names (or, for auto, the one this thread runs on) and
// returns that CPU, or -1 when it keeps none (any, or auto where queued
// may use only one CPU). A CPU queued may not use is an error naming the
// ones it may; so is a failure to set the threads, after which they are
// set back (see pin). Call it once, early, from main: threads started later
// take their affinity from the thread that starts them.
func Keep(s string) (int, error) {
	if err := CheckSetting(s); err != nil {
		return -1, err
	}
	if s == Any {
		return -1, nil
	}
	if startErr != nil {
		if s == Auto {
			return -1, nil
		}
		return -1, fmt.Errorf("reading the CPUs queued may use: %w", startErr)
	}
	cpu := -1
	if s == Auto {
		if started.Count() < 2 {
			return -1, nil
		}
		c, err := currentCPU()
		if err != nil || !started.IsSet(c) {
			return -1, nil // nothing to keep to: stay unpinned
		}
		cpu = c
	} else {
		cpu, _ = cpuNumber(s)
		if !started.IsSet(cpu) { // false past the set's end too
			return -1, fmt.Errorf("CPU %d is not one queued may use (%s)", cpu, List(started))
		}
	}
	if err := pin(cpu); err != nil {
		return -1, err
	}
	return cpu, nil
}

// currentCPU is the CPU this thread runs on.
func currentCPU() (int, error) {
	var cpu uint32
	if _, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), 0, 0); e != 0 {
		return -1, e
	}
	return int(cpu), nil
}

// pin keeps every thread of this process on cpu. The runtime's
// GOMAXPROCS is fixed first at what it chose from every CPU, lest it
// follow the affinity down to one P: a thread blocked in fdatasync
// would then hold up every goroutine until the runtime took its P back.
//
// JobCPUs hands the CPUs on from before the first thread is set, so no
// helper started meanwhile keeps a thread's one CPU; should setting fail
// part way, every thread is set back to what it started with, and only
// then does JobCPUs stop handing them on.
func pin(cpu int) error {
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var one unix.CPUSet
	one.Set(cpu)
	pinned.Store(true)
	if err := setEveryThread(one); err != nil {
		if setEveryThread(started) == nil {
			pinned.Store(false)
		}
		return fmt.Errorf("keeping queued to CPU %d: %w", cpu, err)
	}
	return nil
}

// setEveryThread sets the affinity of every thread of this process to
// set. A thread started meanwhile by one not yet set would be missed,
// so it goes over the threads again until one pass finds them all set.
func setEveryThread(set unix.CPUSet) error {
	for range 16 {
		tids, err := threads()
		if err != nil {
			return err
		}
		changed := false
		for _, tid := range tids {
			var cur unix.CPUSet
			if err := unix.SchedGetaffinity(tid, &cur); err != nil {
				if errors.Is(err, unix.ESRCH) {
					continue // the thread ended
				}
				return fmt.Errorf("reading thread %d's CPUs: %w", tid, err)
			}
			if cur == set {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("setting thread %d's CPUs: %w", tid, err)
			}
			changed = true
		}
		if !changed {
			return nil
		}
	}
	return errors.New("threads kept starting while they were set")
}

// threads lists this process's threads.
func threads() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("listing queued's threads: %w", err)
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// JobCPUs is the set of CPUs a process queued starts must take back
// before it runs anything of a user's, and whether it must: only once
// Keep kept queued to one CPU do they differ from what it inherits.
func JobCPUs() (unix.CPUSet, bool) {
	if !pinned.Load() {
		return unix.CPUSet{}, false
	}
	return started, true
}

// List writes set as the kernel's lists do ("0-3,6"), for messages.
func List(set unix.CPUSet) string {
	var b strings.Builder
	limit := len(set) * 64
	for cpu := 0; cpu < limit; cpu++ {
		if !set.IsSet(cpu) {
			continue
		}
		end := cpu
		for end+1 < limit && set.IsSet(end+1) {
			end++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpu))
		if end > cpu {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(end))
		}
		cpu = end
	}
	return b.String()
}
