package procscan

import (
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// maxConcurrentReads bounds the identity reads in flight or returned and not
// yet applied. Each holds two descriptors at most, and a read stuck in the kernel keeps its slot, so a
// few stuck processes slow the naming of new ones without stopping it.
const maxConcurrentReads = 16

// ErrReadPending is the Err of a pending identity (Identity.Pending): the
// read of the process's identity had not returned when the scan ended.
var ErrReadPending = errors.New("identity read still in progress (a procfs read is blocked)")

// ScanTimeoutError is the only error of a Result that ScanContext returned
// because its context ended before the scan did. The Result is incomplete
// and holds nothing else; the scan goes on and a later call returns it.
type ScanTimeoutError struct {
	// Err is the context's error (context.DeadlineExceeded, usually).
	Err error
}

func (e *ScanTimeoutError) Error() string {
	return "scan of the driver's pids files still running when the scrape ended (a read is blocked): " + e.Err.Error()
}

// Unwrap returns the context's error.
func (e *ScanTimeoutError) Unwrap() error { return e.Err }

// reader reads one process's stat, cmdline and comm. The scan has one for
// its start-time checks; every identity read has its own, because it runs
// on a goroutine of its own.
type reader struct {
	procPath string
	redact   func(string) string
	attr     AttributionOptions
	buf      []byte
	stat     [statBufSize]byte
}

// preadStart reads the start time through an open /proc/<pid>/stat.
func (r *reader) preadStart(fd int) (uint64, error) {
	for {
		n, err := unix.Pread(fd, r.stat[:], 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		return parseStartTime(r.stat[:n])
	}
}

// readStart reads the start time of pid by path, for entries without a
// held descriptor.
func (r *reader) readStart(pid int) (uint64, error) {
	fd, err := open(r.procPath + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	return r.preadStart(fd)
}

// readJob is one identity read: its input, then its result once done.
type readJob struct {
	e     *entry
	pid   int
	gen   uint64 // the scan that started it
	epoch uint64 // Scanner.epoch when it started

	id      Identity
	startOK bool
	fd      int  // the stat descriptor read through, or -1
	emfile  bool // an open failed for want of descriptors
}

func (j *readJob) closeFD() {
	if j.fd >= 0 {
		unix.Close(j.fd)
		j.fd = -1
	}
}

// dispatch starts the identity read of e's PID on a goroutine of its own.
func (s *Scanner) dispatch(e *entry) {
	s.mu.Lock()
	j := &readJob{e: e, pid: e.pid, gen: s.gen, epoch: s.epoch, fd: -1}
	s.reads++
	s.mu.Unlock()
	e.job = j
	s.waiting++
	go s.read(j)
}

// read runs one identity read and hands its result to the scanner.
func (s *Scanner) read(j *readJob) {
	s.slots <- struct{}{}
	r := reader{procPath: s.procPath, redact: s.redact, attr: s.attribution}
	j.resolve(&r)
	s.mu.Lock()
	s.reads--
	if j.epoch != s.epoch {
		j.closeFD() // the scanner was closed meanwhile
		<-s.slots
	} else {
		// The slot is given back when the result is applied: until then
		// the read's descriptor is still open.
		s.finished = append(s.finished, j)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// resolve reads a fresh identity in one pass: start time, then cmdline (or
// comm) and the attribution switched on, then the start time again through
// the same descriptor. The second
// read proves the process outlived the first two, so the name belongs to
// that start time and not to a successor that took the PID.
func (j *readJob) resolve(r *reader) {
	dir := r.procPath + "/" + strconv.Itoa(j.pid)
	var start uint64
	fd, err := open(dir + "/stat")
	j.emfile = isEMFILE(err)
	if err == nil {
		j.fd = fd
		start, err = r.preadStart(fd)
		j.startOK = err == nil
	}
	id := r.readIdentity(j.pid, dir)
	j.emfile = j.emfile || isEMFILE(id.Err)
	if r.attr.Any() {
		id.Attribution = r.readAttribution(dir, r.attr)
	}
	if j.startOK {
		if again, err := r.preadStart(fd); err != nil || again != start {
			// Exited mid-read: nothing read can be vouched for.
			id = pidIdentity(j.pid, fmt.Errorf("pid %d exited while its identity was read", j.pid))
			id.Attribution = unknownAttribution(r.attr)
			start, j.startOK = 0, false
		}
	}
	id.StartTime = start
	j.id = id
}

// pidIdentity is the fallback that names a process after its PID.
func pidIdentity(pid int, err error) Identity {
	p := strconv.Itoa(pid)
	return Identity{PID: pid, CommandLine: p, FriendlyName: p, Source: SourcePID, Err: err}
}

// awaitReads waits, up to the read timeout, for the reads this scan
// started, applying each as it arrives.
func (s *Scanner) awaitReads() {
	if s.waiting == 0 {
		return
	}
	timer := time.NewTimer(s.readTimeout)
	defer timer.Stop()
	for {
		s.applyFinished()
		if s.waiting == 0 {
			return
		}
		select {
		case <-s.wake:
		case <-timer.C:
			s.applyFinished()
			s.waiting = 0
			return
		}
	}
}

// applyFinished takes up every read that has returned.
func (s *Scanner) applyFinished() {
	s.mu.Lock()
	done := s.finished
	s.finished = nil
	s.mu.Unlock()
	for _, j := range done {
		s.apply(j)
	}
}

// apply records a returned read in its cache entry, if the entry is still
// waiting for it.
func (s *Scanner) apply(j *readJob) {
	<-s.slots
	if j.gen == s.gen {
		s.waiting--
	}
	e := j.e
	if s.cache[j.pid] != e || e.job != j {
		j.closeFD() // forgotten meanwhile
		return
	}
	e.job = nil
	if j.emfile {
		// Out of descriptors: give held ones back and read it again
		// next scan; until then it keeps what it had.
		j.closeFD()
		s.shed()
		return
	}
	if !j.startOK && e.named && e.startOK {
		// The process we knew can no longer be read (it exited; the
		// driver drops its descriptors a moment later), and no other
		// process can be shown to hold the PID: it keeps the identity it
		// had, rather than being renamed after its PID.
		j.closeFD()
		return
	}
	s.release(e)
	e.id, e.startOK, e.named, e.nextStart = j.id, j.startOK, true, 0
	if j.startOK && s.held < s.maxHeld {
		e.statFD, j.fd = j.fd, -1
		s.held++
	}
	j.closeFD()
}

// reported is the identity a scan reports for e; a pending one's
// attribution is Unknown in every field that o switches on.
func (e *entry) reported(o AttributionOptions) Identity {
	if e.named {
		return e.id
	}
	id := pidIdentity(e.pid, ErrReadPending)
	id.Pending, id.StartTime = true, e.nextStart
	id.Attribution = unknownAttribution(o)
	return id
}

// release closes e's held stat descriptor, if any.
func (s *Scanner) release(e *entry) {
	if e.statFD >= 0 {
		unix.Close(e.statFD)
		e.statFD = -1
		s.held--
	}
}

// shed gives back every held descriptor and halves the cap: the process is
// at its descriptor limit, and reading by path needs none kept open.
func (s *Scanner) shed() {
	s.maxHeld = s.held / 2
	for _, e := range s.cache {
		s.release(e)
	}
}

// shedOnEMFILE runs op and, if it failed for want of descriptors, sheds the
// held ones and runs it once more.
func (s *Scanner) shedOnEMFILE(op func() error) error {
	err := op()
	if isEMFILE(err) && s.held > 0 {
		s.shed()
		err = op()
	}
	return err
}

func isEMFILE(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// heldCap is how many stat descriptors the cache may hold: half the soft
// descriptor limit, less two for every read that may be in flight. The
// other half is left to everything else the collector opens (sockets,
// exporters, its own files).
func heldCap() int {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	soft := min(lim.Cur, 1<<30)
	return max(int(soft)/2-2*maxConcurrentReads, 0)
}
