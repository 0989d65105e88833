package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
)

// Log is a job's bounded output. Up to the limit, output goes to the file
// as it comes. Past it the log keeps the head (the first half of the
// limit) and the tail (the last half: where a test runner prints its
// summary), and counts what falls between as cut: the tail lives in a
// ring in memory while the job runs, and Close writes the file as head,
// a marker saying how much was cut, and tail. Readers address output by
// its offset in everything the job wrote (see Read and ReadOutput), so an
// offset means the same byte before and after the cut and the Close.
//
// Writes never block on the limit: a child that prints without end is
// drained and never stalls on a full pipe. One Log takes the output of
// several commands in turn (a reset job runs reset, health check and deep
// reset into one log), and readers wait for new output on Changed instead
// of polling.
type Log struct {
	path   string
	limit  int64
	head   int64 // the head kept once output passes the limit: limit/2
	resume bool  // append to the existing file rather than truncate it

	mu        sync.Mutex
	f         *os.File
	produced  int64  // output bytes written: the offset of the next one
	disk      int64  // bytes in the file
	ring      []byte // the tail once output passed the limit; output offset o is at (o-head) % len(ring)
	full      bool   // a resumed file already at the limit: further output is dropped
	lost      int64  // output dropped after a write error, or into a full resumed file
	finalized bool   // Close wrote head, marker and tail
	closed    bool
	err       error
	changed   chan struct{}
}

// LogState is a consistent snapshot of a Log.
type LogState struct {
	// Size is the offset just past the last byte a reader can ask for:
	// every output byte written, cut ones included.
	Size int64
	// Disk is how many bytes the file holds now.
	Disk int64
	// Dropped counts output bytes not kept: cut between head and tail, or
	// lost after a write error.
	Dropped int64
	// Truncated is set once output passed the limit.
	Truncated bool
	// Layout says where output was cut, for reading the file once the Log
	// is gone (see ReadOutput); zero when nothing was cut.
	Layout Layout
	// Closed is set when no more output will come.
	Closed bool
	// Err is the first error writing the file, if any.
	Err error
	// Changed is closed at the next change of Size or Closed.
	Changed <-chan struct{}
}

// NewLog returns a log for the output file at path, keeping at most limit
// bytes of output. The file is created (mode 0600, because output may
// carry secrets) by the first write, so a job that prints nothing costs no
// file and creating it is never on the path between two jobs; readers
// treat a missing file as empty. If it cannot be created, the output is
// dropped and the error is kept in the state.
func NewLog(path string, limit int64) *Log {
	limit = max(limit, 2)
	return &Log{path: path, limit: limit, head: limit / 2, changed: make(chan struct{})}
}

// ResumeLog returns a log that continues an existing output file instead
// of replacing it: a reset retried after a restart adds the output of its
// new attempt below the old one. What the file already holds counts
// against the limit; a file already at the limit takes no more. A missing
// file starts empty, as with NewLog.
func ResumeLog(path string, limit int64) *Log {
	l := NewLog(path, limit)
	l.resume = true
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() {
		l.produced, l.disk = fi.Size(), fi.Size()
		l.full = l.produced >= l.limit
	}
	return l
}

// Path is the output file's path, for readers.
func (l *Log) Path() string { return l.path }

// Write keeps what the limit allows (see Log) and counts the rest. It
// always reports success, so the copy from the child's pipe never stops
// early.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil && !l.closed && l.err == nil {
		var f *os.File
		var err error
		if l.resume {
			f, err = openExisting(l.path, os.O_RDWR|os.O_APPEND)
			if errors.Is(err, fs.ErrNotExist) {
				f, err = createFile(l.path, os.O_RDWR|os.O_APPEND)
			}
		} else {
			f, err = createFile(l.path, os.O_RDWR)
		}
		if err != nil {
			l.err = fmt.Errorf("creating output file: %w", err)
		}
		l.f = f
	}
	if l.closed || l.err != nil || l.full {
		l.lost += int64(len(p))
		return len(p), nil
	}
	n := len(p)
	before := l.produced
	if l.ring == nil {
		keep := min(int64(len(p)), l.limit-l.produced)
		w, err := l.f.Write(p[:keep])
		l.produced += int64(w)
		l.disk += int64(w)
		p = p[w:]
		if err != nil {
			l.err = fmt.Errorf("writing %s: %w", l.path, err)
			l.lost += int64(len(p))
			p = nil
		}
		if len(p) > 0 {
			l.startCut()
		}
	}
	if l.ring != nil && len(p) > 0 {
		l.toRing(p)
	} else if len(p) > 0 {
		l.lost += int64(len(p))
	}
	if l.produced != before {
		l.notify()
	}
	return n, nil
}

// startCut begins keeping the tail in memory: the file holds exactly the
// limit, and its second half is the tail so far.
func (l *Log) startCut() {
	ring := make([]byte, l.limit-l.head)
	if _, err := l.f.ReadAt(ring, l.head); err != nil {
		l.err = fmt.Errorf("reading back %s: %w", l.path, err)
		return
	}
	l.ring = ring
}

// toRing adds output to the tail ring; only its last len(ring) bytes can
// matter.
func (l *Log) toRing(p []byte) {
	t := int64(len(l.ring))
	if skip := int64(len(p)) - t; skip > 0 {
		p = p[skip:]
		l.produced += skip
	}
	for len(p) > 0 {
		c := copy(l.ring[(l.produced-l.head)%t:], p)
		p = p[c:]
		l.produced += int64(c)
	}
}

// notify wakes everyone waiting on Changed; l.mu is held.
func (l *Log) notify() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// layoutLocked is where the output was cut: from head, cut bytes up to
// the tail. Zero when nothing was cut, or when the cut file could not be
// written (its first limit bytes are then plain output).
func (l *Log) layoutLocked() Layout {
	if l.ring == nil || (l.closed && !l.finalized) {
		return Layout{}
	}
	return Layout{CutAt: l.head, Cut: l.produced - l.limit}
}

// State returns a snapshot.
func (l *Log) State() LogState {
	l.mu.Lock()
	defer l.mu.Unlock()
	lay := l.layoutLocked()
	size := l.produced
	if l.ring != nil && lay.Cut == 0 {
		size = l.disk // a cut whose file could not be written: what the file holds
	}
	dropped := l.lost
	if l.ring != nil {
		dropped += l.produced - l.limit
	}
	return LogState{Size: size, Disk: l.disk, Dropped: dropped, Truncated: l.ring != nil || l.full, Layout: lay,
		Closed: l.closed, Err: l.err, Changed: l.changed}
}

// Close ends the log: later writes are dropped, waiters are woken, and a
// cut log's file becomes head, marker and tail. A second Close is a no-op.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	var err error
	if l.ring != nil && l.err == nil {
		if err = l.finalize(); err != nil {
			l.err = err
		}
	}
	l.closed = true
	l.notify()
	if l.f != nil {
		if cerr := l.f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("closing %s: %w", l.path, cerr)
		}
	}
	return err
}

// finalize writes head, marker and tail in order to a new file and puts it
// in place of the output file.
func (l *Log) finalize() error {
	tmp, err := createFile(l.path+".cut", os.O_WRONLY)
	if err != nil {
		return fmt.Errorf("writing the cut output of %s: %w", l.path, err)
	}
	head := make([]byte, l.head)
	_, err = l.f.ReadAt(head, 0)
	cut := l.produced - l.limit
	oldest := (l.produced - l.head) % int64(len(l.ring))
	for _, b := range [][]byte{head, []byte(CutMarker(cut)), l.ring[oldest:], l.ring[:oldest]} {
		if err == nil {
			_, err = tmp.Write(b)
		}
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(l.path+".cut", l.path)
	}
	if err != nil {
		os.Remove(l.path + ".cut")
		return fmt.Errorf("writing the cut output of %s: %w", l.path, err)
	}
	l.finalized = true
	l.disk = l.head + int64(len(CutMarker(cut))) + int64(len(l.ring))
	return nil
}

// Read reads up to n bytes of output from offset (see Log): the head and
// the tail as they are, and in place of the cut part the marker, whose
// next offset is the tail's first. It returns the data, the offset to ask
// for next and Size.
func (l *Log) Read(offset, n int64) ([]byte, int64, int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ring == nil || l.closed {
		return ReadOutput(l.path, l.layoutLocked(), offset, n)
	}
	// Live, cut: head from the file, tail from the ring.
	t := int64(len(l.ring))
	tailStart := l.produced - t
	switch {
	case offset >= l.produced || n <= 0:
		return nil, offset, l.produced, nil
	case offset < l.head:
		return readFile(l.f, offset, min(n, l.head-offset), l.produced)
	case offset < tailStart:
		return []byte(CutMarker(tailStart - l.head)), tailStart, l.produced, nil
	}
	n = min(n, l.produced-offset)
	out := make([]byte, 0, n)
	for int64(len(out)) < n {
		pos := (offset + int64(len(out)) - l.head) % t
		out = append(out, l.ring[pos:min(t, pos+n-int64(len(out)))]...)
	}
	return out, offset + n, l.produced, nil
}
