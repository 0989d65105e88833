package runner

import (
	"bytes"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The sweep after a job (see trace) needs to look only at processes
// started since the job's leader: every process of a job descends from
// it, so the kernel handed out its PID after the leader's. PIDs are
// handed out in increasing order, wrapping at pid_max, so they all lie in
// the window from the leader's PID to the last PID handed out
// (ns_last_pid), unless the counter has gone all the way round since,
// which the number of forks since boot (/proc/stat's "processes") bounds.
// Within that window, on a host of a few hundred processes, the sweep
// reads a handful of stat files instead of every process's.
//
// A process that may choose its PID (clone3's set_tid) or move the
// counter (writing ns_last_pid) needs CAP_SYS_ADMIN over queued's PID
// namespace; a job with that can shed its audit session as well, and no
// sweep holds it.

// reservedPIDs is where the kernel's PID counter starts again after
// pid_max (RESERVED_PIDS): the window never reaches below it after a wrap.
const reservedPIDs = 300

// pidClock is what bounds the window of PIDs handed out since a moment:
// the forks since boot, the tasks alive and pid_max, read before a
// leader's start. ok is false when any could not be read.
type pidClock struct {
	forks  uint64
	tasks  uint64
	pidMax int
	ok     bool
	// after, when above 0, is the last PID handed out before the job's
	// program could start a process: a spare helper's (spare.go), read
	// as its request is written, so the window leaves out the PIDs of
	// the helper's own threads and of whatever started while it waited.
	after int
}

// A spare's start reads the PID clock (its job's window starts after
// it), and so does the sweep after every job: in a drain of short jobs
// they come a few milliseconds apart, and each reading is three files
// of /proc, /proc/stat among them (it sums every CPU's counters). Any
// clock read before a leader's start bounds its window soundly, an
// older one only more loosely (more forks since), so readPIDClock takes
// the clock read last, by a start or a sweep, while it is younger than
// clockReuse (issue 41).
const clockReuse = time.Second

// stampedClock is a PID clock and when it was read.
type stampedClock struct {
	c  pidClock
	at time.Time
}

// lastClocks holds, for each /proc root read (the real one; a test's
// fake trees), the PID clock read last there (see clockReuse).
var lastClocks sync.Map // root → *stampedClock

// keepClock notes c, just read from procRoot, for readPIDClock.
func keepClock(procRoot string, c pidClock) {
	if c.ok {
		lastClocks.Store(procRoot, &stampedClock{c: c, at: time.Now()})
	}
}

// readPIDClock is the PID counters of procRoot's kernel, read now or
// within clockReuse.
func readPIDClock(procRoot string) pidClock {
	if l, ok := lastClocks.Load(procRoot); ok {
		if last := l.(*stampedClock); time.Since(last.at) < clockReuse {
			return last.c
		}
	}
	c := readPIDClockNow(procRoot)
	keepClock(procRoot, c)
	return c
}

// readPIDClockNow reads the PID counters of procRoot's kernel.
func readPIDClockNow(procRoot string) pidClock {
	var c pidClock
	var ok1, ok2, ok3 bool
	buf := make([]byte, 4096)
	c.forks, ok1 = forksSinceBoot(procRoot, buf)
	c.tasks, ok2 = tasksAlive(procRoot, buf)
	c.pidMax, ok3 = readInt(procRoot+"/sys/kernel/pid_max", buf)
	c.ok = ok1 && ok2 && ok3 && c.pidMax > reservedPIDs
	return c
}

// pidWindow is the cyclic range of PIDs (lo, hi]: those handed out after
// lo, up to hi, wrapping at pid_max.
type pidWindow struct {
	lo, hi int
	pidMax int // where the PIDs wrap
}

// probeMax bounds the windows whose PIDs a scan tries one by one: beyond
// it, listing /proc costs less than the failed opens of the PIDs no
// longer there.
const probeMax = 128

// size is how many PIDs w holds.
func (w *pidWindow) size() int {
	switch {
	case w.lo < w.hi:
		return w.hi - w.lo
	case w.lo > w.hi:
		return w.pidMax - 1 - w.lo + w.hi
	}
	return 0
}

// names lists the PIDs of w as /proc's entry names, for a window small
// enough to try one by one (see probeMax), else nil and false. Past the
// wrap it lists from 1: the kernel starts again at RESERVED_PIDS, or
// lower in a young PID namespace.
func (w *pidWindow) names() ([]string, bool) {
	if w == nil || w.size() > probeMax {
		return nil, false
	}
	names := make([]string, 0, w.size())
	for pid := w.lo + 1; pid != w.hi+1; pid++ {
		if pid >= w.pidMax {
			pid = 1
		}
		names = append(names, strconv.Itoa(pid))
		if pid == w.hi {
			break
		}
	}
	return names, true
}

// holds reports whether pid lies in w; a nil window holds every pid.
func (w *pidWindow) holds(pid int) bool {
	switch {
	case w == nil:
		return true
	case w.lo < w.hi:
		return pid > w.lo && pid <= w.hi
	case w.lo > w.hi: // wrapped at pid_max
		return pid > w.lo || pid <= w.hi
	}
	return false // nothing handed out since lo
}

// windowSince is the window of PIDs handed out since leader, whose start
// followed the reading of c, or nil (every pid) when the counters cannot
// bound it: unreadable, pid_max changed, or so many forks since, with
// the tasks alive then, that the counter may have gone round (each fork
// moves it at least one, each PID in use at most one more).
func windowSince(procRoot string, leader int, c pidClock) *pidWindow {
	if !c.ok {
		return nil
	}
	buf := make([]byte, 4096)
	hi, ok := readInt(procRoot+"/sys/kernel/ns_last_pid", buf)
	if !ok {
		return nil
	}
	// Read after the last PID, the forks count every PID up to it.
	forks, ok1 := forksSinceBoot(procRoot, buf)
	pidMax, ok2 := readInt(procRoot+"/sys/kernel/pid_max", buf)
	if ok1 && ok2 {
		// Read after the forks, the tasks alive make this reading a clock
		// for the next start (see clockReuse).
		tasks, ok3 := tasksAlive(procRoot, buf)
		keepClock(procRoot, pidClock{forks: forks, tasks: tasks, pidMax: pidMax, ok: ok3 && pidMax > reservedPIDs})
	}
	switch {
	case !ok1 || !ok2 || pidMax != c.pidMax || forks < c.forks:
		return nil
	case leader <= 0 || leader >= pidMax || hi <= 0 || hi >= pidMax || c.after >= pidMax:
		return nil
	case 2*(forks-c.forks)+c.tasks >= uint64(pidMax-reservedPIDs):
		return nil
	}
	lo := leader
	if c.after > 0 {
		lo = c.after
	}
	return &pidWindow{lo: lo, hi: hi, pidMax: pidMax}
}

// forksSinceBoot is the "processes" line of procRoot/stat: every fork
// and thread since boot. The file is read whole, through buf while it
// fits: on a host with many CPUs and interrupts it runs to tens of
// kilobytes before that line.
func forksSinceBoot(procRoot string, buf []byte) (uint64, bool) {
	b, err := readWhole(procRoot+"/stat", buf)
	if err != nil {
		return 0, false
	}
	_, rest, found := bytes.Cut(b, []byte("\nprocesses "))
	if !found {
		return 0, false
	}
	line, _, _ := bytes.Cut(rest, []byte{'\n'})
	n, err := strconv.ParseUint(string(bytes.TrimSpace(line)), 10, 64)
	return n, err == nil
}

// tasksAlive is the number of tasks (processes and threads) alive, from
// the fourth field of procRoot/loadavg ("running/total").
func tasksAlive(procRoot string, buf []byte) (uint64, bool) {
	b, ok := readSmall(procRoot+"/loadavg", buf)
	if !ok {
		return 0, false
	}
	f := bytes.Fields(b)
	if len(f) < 4 {
		return 0, false
	}
	_, total, found := bytes.Cut(f[3], []byte{'/'})
	if !found {
		return 0, false
	}
	n, err := strconv.ParseUint(string(total), 10, 64)
	return n, err == nil
}

// readInt reads a file holding one decimal number.
func readInt(path string, buf []byte) (int, bool) {
	b, ok := readSmall(path, buf)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	return n, err == nil
}

// readSmall reads a file that fits buf with one open, read and close.
func readSmall(path string, buf []byte) ([]byte, bool) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, false
	}
	n, err := unix.Read(fd, buf)
	unix.Close(fd)
	if err != nil || n <= 0 || n == len(buf) {
		return nil, false
	}
	return buf[:n], true
}
