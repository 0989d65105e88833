package procscan

import (
	"cmp"
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Default paths, for hosts where the collector runs in the host's mount and
// PID namespaces.
const (
	DefaultDriverPath = "/proc/driver/tenstorrent"
	DefaultProcPath   = "/proc"
)

const (
	// maxCmdlineRead bounds how much of /proc/<pid>/cmdline is read: the
	// kernel's bound on a process's argument vector (a quarter of an 8 MiB
	// stack limit times three, 6 MiB). readCmdline stops far earlier on any
	// line whose first bytes are printable.
	maxCmdlineRead = 6 << 20
	// maxCommRead bounds /proc/<pid>/comm (the kernel keeps at most 64 bytes).
	maxCommRead = 256
	// statBufSize holds /proc/<pid>/stat through field 22: a 64-byte comm
	// plus twenty numbers of at most 20 digits. A longer line is simply read
	// short, which leaves field 22 intact.
	statBufSize = 1024
	// DefaultReadTimeout is how long a scan waits for the identity reads it
	// started before it reports the holders still being read with the PID
	// fallback (see Options.ReadTimeout).
	DefaultReadTimeout = time.Second
)

// Options configures a Scanner. The zero value scans the host.
type Options struct {
	// DriverPath is the directory holding one numeric directory per device,
	// each with a pids file. Default DefaultDriverPath.
	DriverPath string
	// ProcPath is where /proc/<pid>/{stat,cmdline,comm} are read. Default
	// DefaultProcPath.
	ProcPath string
	// SelfPID is excluded from every result, because the collector opens the
	// devices it monitors. Zero or negative means os.Getpid().
	SelfPID int
	// Redact, when set, rewrites a sanitized command line before it is
	// reported and before the friendly name is derived from it (the receiver
	// replaces command_line_redact matches with RedactedMark). It sees a
	// space inside an argument as ArgSpace, so a pattern can take a whole
	// argument with \S+. Its output is sanitized again. It is called once per
	// newly seen process, and only for identities read from cmdline. It may
	// be called from several goroutines at once.
	Redact func(commandLine string) string
	// ReadTimeout bounds how long a scan waits for the identities it reads.
	// A read of /proc/<pid>/cmdline blocks while the target is stuck in the
	// kernel holding its memory map lock; such a holder is reported with
	// the PID fallback (Identity.Pending) and named by a later scan once the
	// read returns. Zero means DefaultReadTimeout.
	ReadTimeout time.Duration
	// Attribution switches on reads that say whose each newly seen holder
	// is (Identity.Attribution): made with its identity, on the same
	// goroutine and under the same ReadTimeout, once per process.
	Attribution AttributionOptions
	// CountOnly reads the pids files and nothing in ProcPath: Processes
	// carry their PIDs and devices and a zero Identity. For a reader whose
	// ProcPath is not of its own PID namespace (see CheckPIDNamespace).
	CountOnly bool
}

// Scanner is a long-lived reader of the driver's pids files. It caches each
// process's Identity by PID so that steady-state scans cost little more than
// reading the pids files, and so that a process keeps its labels for life.
//
// A Scanner is not safe for concurrent use: give each goroutine its own, or
// serialize calls. It holds one open file per cached process, up to a cap
// derived from the descriptor limit (see Scan); Close releases them.
type Scanner struct {
	driverPath  string
	procPath    string
	self        int
	redact      func(string) string
	readTimeout time.Duration
	countOnly   bool
	attribution AttributionOptions

	// gen numbers scans, so an entry can tell whether it was listed in the
	// current one without a per-scan set.
	gen   uint64
	cache map[int]*entry
	// held counts the stat descriptors open in cache entries; maxHeld caps
	// it (see heldCap).
	held    int
	maxHeld int

	// Scratch reused from scan to scan, owned by the scan running.
	listed    []*entry
	devices   []int
	linePIDs  []int
	pidsPaths map[int]string
	rd        reader
	// waiting counts the reads started by the current scan and not yet
	// applied.
	waiting int

	// mu guards what the scan goroutine shares with callers and with the
	// identity reads in flight.
	mu sync.Mutex
	// result is non-nil while a scan started by ScanContext is outstanding;
	// it delivers that scan's Result.
	result chan Result
	// running is set while a scan goroutine runs; dropAfter asks it to
	// empty the cache when it ends (Close came while it ran).
	running, dropAfter bool
	// epoch is bumped by Close, so that a read finishing afterwards closes
	// its own descriptor instead of handing it to a dropped cache.
	epoch    uint64
	reads    int        // identity reads in flight
	finished []*readJob // reads finished and not yet applied
	wake     chan struct{}
	slots    chan struct{}
}

// entry is the cache record of one PID.
type entry struct {
	pid int
	// named says id was read (possibly as the PID fallback of a process
	// that could not be read at all); until then the PID is reported with
	// the pending fallback.
	named bool
	id    Identity
	// startOK says id.StartTime was actually read (0 is a valid start time).
	startOK bool
	// statFD is /proc/<pid>/stat kept open to re-check the start time, or -1.
	statFD int
	// job is the identity read in flight for this PID: there is at most one.
	job *readJob
	// nextStart is the start time of a process seen to have taken the PID
	// over, reported with the pending identity until its read returns.
	nextStart uint64
	// gen is the last scan that listed the PID; devices lists its devices in
	// that scan, in ascending order because devices are read in that order.
	gen     uint64
	devices []int
}

// New returns a Scanner for opts, filling in the defaults.
func New(opts Options) *Scanner {
	s := &Scanner{
		driverPath:  cmp.Or(opts.DriverPath, DefaultDriverPath),
		procPath:    cmp.Or(opts.ProcPath, DefaultProcPath),
		self:        opts.SelfPID,
		redact:      opts.Redact,
		readTimeout: cmp.Or(opts.ReadTimeout, DefaultReadTimeout),
		countOnly:   opts.CountOnly,
		attribution: opts.Attribution,
		cache:       make(map[int]*entry),
		pidsPaths:   make(map[int]string),
		maxHeld:     heldCap(),
		wake:        make(chan struct{}, 1),
		slots:       make(chan struct{}, maxConcurrentReads),
	}
	s.rd = reader{procPath: s.procPath, redact: s.redact, attr: s.attribution, buf: make([]byte, 0, 4096)}
	if s.self <= 0 {
		s.self = os.Getpid()
	}
	return s
}

// SelfPID returns the PID the scanner excludes as its own. A value of 1
// means the caller runs in a private PID namespace, where every other
// holder reads back as 0.
func (s *Scanner) SelfPID() int { return s.self }

// Scan is ScanContext without a deadline: it returns when the pids files
// have been read, however long that takes. Identity reads are still bounded
// by Options.ReadTimeout.
func (s *Scanner) Scan() Result { return s.ScanContext(context.Background()) }

// ScanContext reads every device's pids file and returns the holders with
// their identities. It never fails as a whole: problems are reported in
// Result.Errors and make the Result incomplete.
//
// No read can hold it past ctx. The scan runs on its own goroutine; if ctx
// ends first, ScanContext returns an incomplete Result whose only error is a
// *ScanTimeoutError, and the scan goes on in the background: the next call
// waits for that same scan (never starting a second) and returns its Result
// once it ends. Identity reads of newly seen processes run on goroutines of
// their own, at most one per PID and a few at a time; a scan waits for them
// up to Options.ReadTimeout and reports a holder whose read has not
// finished with the PID fallback, flagged Identity.Pending. The read's
// result is taken up by a later scan.
//
// A cached identity is trusted while the process's start time is unchanged.
// To check it, the cache keeps /proc/<pid>/stat open and re-reads it with
// pread each scan: one system call, where open/read/close by path is three
// plus a path walk (BenchmarkStartTimeCheck: about 3 µs against 5.5 µs per
// process on a 2-CPU VM, with no allocation against three), and a descriptor
// held across an exit fails with ESRCH, so PID reuse is caught even if the
// new process's start time happened to match. At most half the descriptor
// limit (RLIMIT_NOFILE) less room for the reads in flight is held; past it,
// and whenever an open fails with EMFILE (which also gives held descriptors
// back), processes are verified by path instead.
//
// A process that was named and can no longer be read while the driver still
// lists its PID (it exited and the driver has not yet dropped its
// descriptors) keeps its identity: only a start time read and found
// different proves another process holds the PID. An identity that fell
// back to the PID (stat unreadable too) stays as it is while stat stays
// unreadable; once a start time can be read, the PID is treated as a new
// process. An identity taken from comm is read again every scan: an empty
// cmdline is also what a process shows in the middle of execve (its start
// time does not change, its name and arguments are about to), and caching
// that would name it after its comm for as long as it lives.
//
// Cache entries whose PID is no longer listed are dropped after a complete
// scan. After an incomplete scan they are kept, unless their process can be
// seen to have gone (its stat fails or the start time changed), since the
// unread device may still list them.
//
// A steady-state scan allocates the Result's four slices and a few objects
// per device (directory entries, the path handed to open), nothing per
// cached process.
func (s *Scanner) ScanContext(ctx context.Context) Result {
	s.mu.Lock()
	if s.result == nil && ctx.Done() == nil {
		// Nothing can end the wait early: scan on this goroutine.
		s.running = true
		s.mu.Unlock()
		return s.scanAndSettle()
	}
	if s.result == nil {
		ch := make(chan Result, 1)
		s.result, s.running = ch, true
		go func() { ch <- s.scanAndSettle() }()
	}
	ch := s.result
	s.mu.Unlock()
	select {
	case res := <-ch:
		s.mu.Lock()
		s.result = nil
		s.mu.Unlock()
		return res
	case <-ctx.Done():
		return Result{Errors: []error{&ScanTimeoutError{Err: ctx.Err()}}}
	}
}

// scanAndSettle runs one scan, then empties the cache if Close came while
// it ran.
func (s *Scanner) scanAndSettle() Result {
	res := s.scan()
	s.mu.Lock()
	s.running = false
	if s.dropAfter {
		s.dropAfter = false
		s.dropCache()
	}
	s.mu.Unlock()
	return res
}

func (s *Scanner) scan() Result {
	s.gen++
	s.listed = s.listed[:0]
	res := Result{Complete: true}

	var devs []int
	err := s.shedOnEMFILE(func() (err error) {
		devs, err = listDevices(s.driverPath, s.devices[:0])
		return err
	})
	s.devices = devs
	if err != nil {
		res.Complete = false
		res.Errors = append(res.Errors, err)
	}
	res.Devices = make([]Device, 0, len(devs))
	for _, n := range devs {
		d := Device{Number: n}
		if err := s.shedOnEMFILE(func() error { return s.readDevice(&d) }); err != nil {
			res.Complete = false
			res.Errors = append(res.Errors, err)
		}
		res.Foreign = res.Foreign || d.Foreign
		res.Devices = append(res.Devices, d)
	}

	s.applyFinished()
	for _, e := range s.listed {
		switch {
		case s.countOnly:
		case e.job != nil:
			// A read of this PID is in flight: never a second one.
		case !e.named || e.id.Source == SourceComm:
			s.dispatch(e)
		default:
			if live, start := s.check(e); live == replaced {
				// Another process holds the PID: its start time is
				// known now, its name once the read returns.
				s.release(e)
				e.named, e.nextStart = false, start
				s.dispatch(e)
			}
		}
	}
	s.awaitReads()
	slices.SortFunc(s.listed, func(a, b *entry) int { return cmp.Compare(a.pid, b.pid) })
	res.Processes = s.processes()
	s.forget(res.Complete)
	return res
}

// readDevice reads one device's pids file and records its holders, both in
// d and in the cache entries of the PIDs it lists.
func (s *Scanner) readDevice(d *Device) error {
	path, ok := s.pidsPaths[d.Number]
	if !ok {
		path = s.driverPath + "/" + strconv.Itoa(d.Number) + "/pids"
		s.pidsPaths[d.Number] = path
	}
	data, err := readFile(path, &s.rd.buf, maxPIDsFile)
	if err == nil && len(data) == maxPIDsFile {
		err = errPIDsTooLarge
	}
	if err != nil {
		return &DeviceError{Device: d.Number, Path: path, Err: err}
	}
	// Parse the whole file before recording anything, so a malformed file
	// contributes no holders at all.
	pids, err := parsePIDs(data, s.linePIDs[:0])
	s.linePIDs = pids
	if err != nil {
		return &DeviceError{Device: d.Number, Path: path, Err: err}
	}

	d.Read = true
	for _, pid := range pids {
		switch {
		case pid == s.self:
			continue
		case pid == 0:
			if !d.Foreign {
				d.Foreign = true
				d.Holders++
			}
			continue
		}
		e := s.cache[pid]
		if e == nil {
			e = &entry{pid: pid, statFD: -1}
			s.cache[pid] = e
		}
		if e.gen != s.gen {
			e.gen = s.gen
			e.devices = e.devices[:0]
			s.listed = append(s.listed, e)
		}
		if n := len(e.devices); n > 0 && e.devices[n-1] == d.Number {
			continue // another descriptor of a holder already counted
		}
		e.devices = append(e.devices, d.Number)
		d.Holders++
	}
	return nil
}

// liveness is what check found of a cached process.
type liveness uint8

const (
	alive    liveness = iota // the same process still holds the PID, or it cannot be told
	gone                     // the process can no longer be read
	replaced                 // another process holds the PID
)

// check tells whether e's PID still names the process whose identity is
// cached (see ScanContext for the rules) and, when another process holds
// it, that process's start time.
func (s *Scanner) check(e *entry) (liveness, uint64) {
	if e.statFD >= 0 {
		start, err := s.rd.preadStart(e.statFD)
		if err == nil {
			if start == e.id.StartTime {
				return alive, 0
			}
			return replaced, start
		}
		// The process behind the descriptor is gone; whoever holds the
		// PID now is checked by path.
		s.release(e)
		start, err = s.rd.readStart(e.pid)
		if err != nil {
			return gone, 0
		}
		return replaced, start
	}
	start, err := s.rd.readStart(e.pid)
	switch {
	case err != nil && !e.startOK:
		return alive, 0 // never verifiable: trusted as it is
	case err != nil:
		return gone, 0
	case !e.startOK || start != e.id.StartTime:
		return replaced, start
	}
	return alive, 0
}

// processes builds Result.Processes from the sorted listed entries. All
// device lists share one backing array, so a scan allocates the same few
// slices whatever the number of processes.
func (s *Scanner) processes() []Process {
	total := 0
	for _, e := range s.listed {
		total += len(e.devices)
	}
	flat := make([]int, 0, total)
	out := make([]Process, len(s.listed))
	for i, e := range s.listed {
		from := len(flat)
		flat = append(flat, e.devices...)
		out[i] = Process{PID: e.pid, Devices: flat[from:len(flat):len(flat)]}
		if !s.countOnly {
			out[i].Identity = e.reported(s.attribution)
		}
	}
	return out
}

// forget drops the cache entries of PIDs the current scan did not list:
// all of them after a complete scan, only those whose process is seen to be
// gone after an incomplete one.
func (s *Scanner) forget(complete bool) {
	for pid, e := range s.cache {
		if e.gen == s.gen {
			continue
		}
		if complete || !e.named || s.countOnly {
			s.release(e)
			delete(s.cache, pid)
			continue
		}
		if live, _ := s.check(e); live != alive {
			s.release(e)
			delete(s.cache, pid)
		}
	}
}

// Close releases the descriptors the cache holds and empties it; if a scan
// is running, that scan empties it when it ends. Identity reads still in
// flight close their own descriptors when they return. The Scanner stays
// usable; the next Scan reads every identity afresh.
func (s *Scanner) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epoch++
	for _, j := range s.finished {
		j.closeFD()
		<-s.slots
	}
	s.finished = nil
	if s.running {
		s.dropAfter = true
		return nil
	}
	s.dropCache()
	return nil
}

// dropCache releases every held descriptor and empties the cache. The
// caller holds s.mu and no scan runs.
func (s *Scanner) dropCache() {
	for pid, e := range s.cache {
		s.release(e)
		delete(s.cache, pid)
	}
}
