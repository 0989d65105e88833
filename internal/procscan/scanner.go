package procscan

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// Default paths, for hosts where the collector runs in the host's mount and
// PID namespaces.
const (
	DefaultDriverPath = "/proc/driver/tenstorrent"
	DefaultProcPath   = "/proc"
)

const (
	// maxCmdlineRead bounds how much of /proc/<pid>/cmdline is read. The
	// label keeps 256 bytes; the rest only matters if the first 64 KiB are
	// almost all dropped as non-printable.
	maxCmdlineRead = 64 << 10
	// maxCommRead bounds /proc/<pid>/comm (the kernel keeps at most 64 bytes).
	maxCommRead = 256
	// statBufSize holds /proc/<pid>/stat through field 22: a 64-byte comm
	// plus twenty numbers of at most 20 digits. A longer line is simply read
	// short, which leaves field 22 intact.
	statBufSize = 1024
	// maxHeldFDs caps how many /proc/<pid>/stat descriptors the cache keeps
	// open, so that a host with thousands of holders cannot push a collector
	// into EMFILE. Processes past the cap are verified by path instead.
	maxHeldFDs = 1024
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
	// replaces command_line_redact matches with "***"). Its output is
	// sanitized again. It is called once per newly seen process, and only for
	// identities read from cmdline.
	Redact func(commandLine string) string
}

// Scanner is a long-lived reader of the driver's pids files. It caches each
// process's Identity by PID so that steady-state scans cost little more than
// reading the pids files, and so that a process keeps its labels for life.
//
// A Scanner is not safe for concurrent use: give each goroutine its own, or
// serialize calls. It holds one open file per cached process (see Scan);
// Close releases them.
type Scanner struct {
	driverPath string
	procPath   string
	self       int
	redact     func(string) string

	// gen numbers scans, so an entry can tell whether it was listed in the
	// current one without a per-scan set.
	gen   uint64
	cache map[int]*entry
	// held counts the stat descriptors open in cache entries.
	held int

	// Scratch reused from scan to scan.
	listed    []*entry
	devices   []int
	linePIDs  []int
	pidsPaths map[int]string
	buf       []byte
	statBuf   [statBufSize]byte
}

// entry is the cache record of one PID.
type entry struct {
	pid      int
	resolved bool
	id       Identity
	// startOK says id.StartTime was actually read (0 is a valid start time).
	startOK bool
	// statFD is /proc/<pid>/stat kept open to re-check the start time, or -1.
	statFD int
	// gen is the last scan that listed the PID; devices lists its devices in
	// that scan, in ascending order because devices are read in that order.
	gen     uint64
	devices []int
}

// New returns a Scanner for opts, filling in the defaults.
func New(opts Options) *Scanner {
	s := &Scanner{
		driverPath: cmp.Or(opts.DriverPath, DefaultDriverPath),
		procPath:   cmp.Or(opts.ProcPath, DefaultProcPath),
		self:       opts.SelfPID,
		redact:     opts.Redact,
		cache:      make(map[int]*entry),
		pidsPaths:  make(map[int]string),
		buf:        make([]byte, 0, 4096),
	}
	if s.self <= 0 {
		s.self = os.Getpid()
	}
	return s
}

// SelfPID returns the PID the scanner excludes as its own. A value of 1
// means the caller runs in a private PID namespace, where every other
// holder reads back as 0.
func (s *Scanner) SelfPID() int { return s.self }

// Scan reads every device's pids file and returns the holders with their
// identities. It never fails as a whole: problems are reported in
// Result.Errors and make the Result incomplete.
//
// A cached identity is trusted while the process's start time is unchanged.
// To check it, the cache keeps /proc/<pid>/stat open and re-reads it with
// pread each scan: one system call, where open/read/close by path is three
// plus a path walk (BenchmarkStartTimeCheck: about 3 µs against 5.5 µs per
// process on a 2-CPU VM, with no allocation against three), and a descriptor
// held across an exit fails with ESRCH, so PID reuse is caught even if the
// new process's start time happened to match. A process that was named and
// can no longer be read while the driver still lists its PID (it exited and
// the driver has not yet dropped its descriptors) keeps its identity: only a
// start time read and found different proves another process holds the
// PID. An identity that fell back to
// the PID (stat unreadable too) stays as it is while stat stays unreadable;
// once a start time can be read, the PID is treated as a new process. An
// identity taken from comm is read again every scan: an empty cmdline is
// also what a process shows in the middle of execve (its start time does
// not change, its name and arguments are about to), and caching that would
// name it after its comm for as long as it lives.
//
// Cache entries whose PID is no longer listed are dropped after a complete
// scan. After an incomplete scan they are kept, unless their process can be
// seen to have gone (the held stat fails or the start time changed), since
// the unread device may still list them.
//
// A steady-state scan allocates the Result's four slices and a few objects
// per device (directory entries, the path handed to open), nothing per
// cached process.
func (s *Scanner) Scan() Result {
	s.gen++
	s.listed = s.listed[:0]
	res := Result{Complete: true}

	devs, err := listDevices(s.driverPath, s.devices[:0])
	s.devices = devs
	if err != nil {
		res.Complete = false
		res.Errors = append(res.Errors, err)
	}
	res.Devices = make([]Device, 0, len(devs))
	for _, n := range devs {
		d := Device{Number: n}
		if err := s.readDevice(&d); err != nil {
			res.Complete = false
			res.Errors = append(res.Errors, err)
		}
		res.Foreign = res.Foreign || d.Foreign
		res.Devices = append(res.Devices, d)
	}

	for _, e := range s.listed {
		if !e.resolved || e.id.Source == SourceComm || !s.sameProcess(e) {
			s.resolve(e)
		}
	}
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
	data, err := readFile(path, &s.buf, maxPIDsFile)
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

// sameProcess reports whether e's PID still names the process whose
// identity is cached (see Scan for the rules).
func (s *Scanner) sameProcess(e *entry) bool {
	if e.statFD >= 0 {
		start, err := s.preadStart(e.statFD)
		return err == nil && start == e.id.StartTime
	}
	start, err := s.readStart(e.pid)
	if err != nil {
		// Unverifiable: trust it if it never had a start time, otherwise
		// the process we knew is gone.
		return !e.startOK
	}
	return e.startOK && start == e.id.StartTime
}

// resolve reads a fresh identity for e's PID in one pass: start time, then
// cmdline (or comm), then the start time again through the same descriptor.
// The second read proves the process outlived the first two, so the name
// belongs to that start time and not to a successor that took the PID.
func (s *Scanner) resolve(e *entry) {
	s.release(e)
	known := struct {
		id      Identity
		startOK bool
	}{e.id, e.resolved && e.startOK}
	dir := s.procPath + "/" + strconv.Itoa(e.pid)
	var start uint64
	e.startOK = false
	fd, err := open(dir + "/stat")
	if err == nil {
		start, err = s.preadStart(fd)
		e.startOK = err == nil
	}

	id := s.readIdentity(e.pid, dir)

	if e.startOK {
		if again, err := s.preadStart(fd); err != nil || again != start {
			// Exited mid-read: nothing read can be vouched for.
			p := strconv.Itoa(e.pid)
			id = Identity{PID: e.pid, CommandLine: p, FriendlyName: p, Source: SourcePID,
				Err: fmt.Errorf("pid %d exited while its identity was read", e.pid)}
			start, e.startOK = 0, false
		}
	}
	if !e.startOK && known.startOK {
		// The process we knew can no longer be read (it exited; the
		// driver drops its descriptors a moment later), and no other
		// process can be shown to hold the PID: it keeps the identity it
		// had, rather than being renamed after its PID.
		if fd >= 0 {
			unix.Close(fd)
		}
		e.id, e.startOK = known.id, true
		return
	}
	switch {
	case e.startOK && s.held < maxHeldFDs:
		e.statFD = fd
		s.held++
	case fd >= 0:
		unix.Close(fd)
	}
	id.StartTime = start
	e.id = id
	e.resolved = true
}

// preadStart reads the start time through an open /proc/<pid>/stat.
func (s *Scanner) preadStart(fd int) (uint64, error) {
	for {
		n, err := unix.Pread(fd, s.statBuf[:], 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		return parseStartTime(s.statBuf[:n])
	}
}

// readStart reads the start time of pid by path, for entries without a
// held descriptor.
func (s *Scanner) readStart(pid int) (uint64, error) {
	fd, err := open(s.procPath + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	return s.preadStart(fd)
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
		out[i] = Process{PID: e.pid, Devices: flat[from:len(flat):len(flat)], Identity: e.id}
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
		if complete || !e.resolved || !s.sameProcess(e) {
			s.release(e)
			delete(s.cache, pid)
		}
	}
}

// release closes e's held stat descriptor, if any.
func (s *Scanner) release(e *entry) {
	if e.statFD >= 0 {
		unix.Close(e.statFD)
		e.statFD = -1
		s.held--
	}
}

// Close releases the descriptors the cache holds and empties it. The
// Scanner stays usable; the next Scan reads every identity afresh.
func (s *Scanner) Close() error {
	for pid, e := range s.cache {
		s.release(e)
		delete(s.cache, pid)
	}
	return nil
}
