package procscan

import (
	"fmt"
	"os"
	"strconv"
)

// ListError reports that the driver directory exists but could not be
// listed. The scan that produced it is incomplete: it read no device at all.
type ListError struct {
	// Path is the driver directory.
	Path string
	// Err is the cause, usually an *fs.PathError wrapping an errno.
	Err error
}

func (e *ListError) Error() string {
	return fmt.Sprintf("listing driver directory %s: %v", e.Path, e.Err)
}

// Unwrap returns the cause so errors.Is(err, fs.ErrPermission) and the like work.
func (e *ListError) Unwrap() error { return e.Err }

// DeviceError reports that one device's pids file could not be read or
// parsed. The scan that produced it is incomplete, and the device's holders
// are missing from it; the other devices were still read. Callers report it
// as a partial error naming the device.
type DeviceError struct {
	// Device is the device number, the name of its directory under the driver path.
	Device int
	// Path is the pids file.
	Path string
	// Err is the cause: an *fs.PathError from reading, or a *LineError.
	Err error
}

func (e *DeviceError) Error() string {
	return fmt.Sprintf("reading pids of device %d (%s): %v", e.Device, e.Path, e.Err)
}

// Unwrap returns the cause, so errors.As(err, &lineErr) and
// errors.Is(err, syscall.EISDIR) see through it.
func (e *DeviceError) Unwrap() error { return e.Err }

// LineError reports a line of a pids file that is not a decimal PID. It
// always arrives wrapped in a [DeviceError] naming the device.
type LineError struct {
	// Line is the 1-based line number.
	Line int
	// Text is the offending line, cut to maxLineText bytes because the file
	// could hold anything.
	Text string
}

// maxLineText bounds LineError.Text.
const maxLineText = 64

func (e *LineError) Error() string {
	return "line " + strconv.Itoa(e.Line) + ": " + strconv.Quote(e.Text) + " is not a decimal PID"
}

// NamespaceError reports that a procfs is not of the reader's PID
// namespace: its self link does not name the reader's own PID. The KMD
// renders the pids files in the reader's namespace, so looking those PIDs up
// in such a procfs (the host's, mounted at /host/proc in a container
// without the host PID namespace) would name unrelated processes.
type NamespaceError struct {
	// ProcPath is the procfs checked.
	ProcPath string
	// Self is the reader's own PID, in its namespace.
	Self int
	// Seen is what ProcPath/self names, when it could be read.
	Seen string
	// Err says why ProcPath/self could not be read, or is nil.
	Err error
}

func (e *NamespaceError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("cannot tell whether %s is this PID namespace's procfs: %v", e.ProcPath, e.Err)
	}
	return fmt.Sprintf("%s is the procfs of another PID namespace: its self is PID %s, but this process is PID %d",
		e.ProcPath, e.Seen, e.Self)
}

// Unwrap returns the cause of an unreadable self link.
func (e *NamespaceError) Unwrap() error { return e.Err }

// CheckPIDNamespace returns a *NamespaceError unless procPath is the procfs
// of the PID namespace whose PID self is (its self link names self).
func CheckPIDNamespace(procPath string, self int) error {
	link, err := os.Readlink(procPath + "/self")
	if err != nil {
		return &NamespaceError{ProcPath: procPath, Self: self, Err: err}
	}
	if n, err := strconv.Atoi(link); err != nil || n != self {
		return &NamespaceError{ProcPath: procPath, Self: self, Seen: link}
	}
	return nil
}
