package runner

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Log is a job's bounded output file. Writes never block on the cap: past
// it, output is counted and dropped, so a child that prints without end is
// drained and never stalls on a full pipe. One Log takes the output of
// several commands in turn (a reset job runs reset, health check and deep
// reset into one log), and readers wait for new output on Changed instead
// of polling.
type Log struct {
	path   string
	limit  int64
	resume bool // append to the existing file rather than truncate it

	mu        sync.Mutex
	f         *os.File
	kept      int64 // output bytes in the file
	size      int64 // file size: kept output plus the truncation marker
	dropped   int64
	truncated bool
	closed    bool
	err       error
	changed   chan struct{}
}

// LogState is a consistent snapshot of a Log.
type LogState struct {
	// Size is how many bytes a reader can read from the file.
	Size int64
	// Dropped counts output bytes beyond the cap (or after a write error).
	Dropped int64
	// Truncated is set once output reached the cap.
	Truncated bool
	// Closed is set when no more output will come.
	Closed bool
	// Err is the first error writing the file, if any.
	Err error
	// Changed is closed at the next change of Size or Closed.
	Changed <-chan struct{}
}

// NewLog returns a log for the output file at path, capped at limit bytes
// of output. The file is created (mode 0600, because output may carry
// secrets) by the first write, so a job that prints nothing costs no file
// and creating it is never on the path between two jobs; readers treat a
// missing file as empty. If it cannot be created, the output is dropped and
// the error is kept in the state.
func NewLog(path string, limit int64) *Log {
	return &Log{path: path, limit: limit, changed: make(chan struct{})}
}

// ResumeLog returns a log that continues an existing output file instead
// of replacing it: a reset retried after a restart adds the output of its
// new attempt below the old one. What the file already holds counts
// against the cap. A missing file starts empty, as with NewLog.
func ResumeLog(path string, limit int64) *Log {
	l := NewLog(path, limit)
	l.resume = true
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
		l.size, l.kept = fi.Size(), fi.Size()
		l.truncated = l.kept >= limit
	}
	return l
}

// Path is the output file's path, for readers.
func (l *Log) Path() string { return l.path }

// TruncationMarker is appended to the file once, when output first reaches
// the cap, so whoever reads the log sees that the rest is missing.
func TruncationMarker(limit int64) string {
	return markerPrefix + strconv.FormatInt(limit, 10) + markerSuffix
}

// markerPrefix and markerSuffix frame every TruncationMarker.
const (
	markerPrefix = "\n[tt-device-queue: output reached the "
	markerSuffix = "-byte limit; the rest was dropped]\n"
)

// InspectLog reports an output file's size and whether it ends with a
// truncation marker, for a job whose Log is gone (one found interrupted at
// start). A missing file is empty.
func InspectLog(path string) (size int64, truncated bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("opening %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, false, fmt.Errorf("reading %s: %w", path, err)
	}
	size = fi.Size()
	tail := make([]byte, min(size, 128))
	if _, err := f.ReadAt(tail, size-int64(len(tail))); err != nil {
		return size, false, fmt.Errorf("reading %s: %w", path, err)
	}
	t := string(tail)
	if rest, ok := strings.CutSuffix(t, markerSuffix); ok {
		if i := strings.LastIndex(rest, markerPrefix); i >= 0 {
			_, err := strconv.ParseUint(rest[i+len(markerPrefix):], 10, 63)
			truncated = err == nil
		}
	}
	return size, truncated, nil
}

// Write keeps what fits under the cap and drops the rest. It always
// reports success, so the copy from the child's pipe never stops early.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil && !l.closed && l.err == nil {
		flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
		if l.resume {
			flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
		}
		f, err := os.OpenFile(l.path, flags, 0o600)
		if err != nil {
			l.err = fmt.Errorf("creating output file: %w", err)
		}
		l.f = f
	}
	if l.closed || l.err != nil {
		l.dropped += int64(len(p))
		return len(p), nil
	}
	size := l.size
	keep := int64(len(p))
	if room := l.limit - l.kept; keep > room {
		keep = max(room, 0)
	}
	if keep > 0 {
		n, err := l.f.Write(p[:keep])
		l.kept += int64(n)
		l.size += int64(n)
		if err != nil {
			l.err = fmt.Errorf("writing %s: %w", l.path, err)
			keep = int64(n)
		}
	}
	if rest := int64(len(p)) - keep; rest > 0 {
		l.dropped += rest
		if !l.truncated && l.err == nil {
			l.truncated = true
			n, err := io.WriteString(l.f, TruncationMarker(l.limit))
			l.size += int64(n)
			if err != nil {
				l.err = fmt.Errorf("writing %s: %w", l.path, err)
			}
		}
	}
	if l.size != size {
		l.notify()
	}
	return len(p), nil
}

// notify wakes everyone waiting on Changed; l.mu is held.
func (l *Log) notify() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// State returns a snapshot.
func (l *Log) State() LogState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LogState{Size: l.size, Dropped: l.dropped, Truncated: l.truncated, Closed: l.closed, Err: l.err, Changed: l.changed}
}

// Close ends the log: later writes are dropped, waiters are woken. A
// second Close is a no-op.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	l.notify()
	if l.f == nil {
		return nil
	}
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", l.path, err)
	}
	return nil
}

// ReadLog reads up to limit bytes at offset from an output file and
// returns them with the file's size. A missing file reads as empty (a job
// that never started has none).
func ReadLog(path string, offset, limit int64) ([]byte, int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("opening output: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("reading output: %w", err)
	}
	size := fi.Size()
	if offset >= size || limit <= 0 {
		return nil, size, nil
	}
	buf := make([]byte, min(limit, size-offset))
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, size, fmt.Errorf("reading output: %w", err)
	}
	return buf[:n], size, nil
}
