package procscan

import (
	"fmt"
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
