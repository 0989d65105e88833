package ttsysfs

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// absent reports the errors that mean "the firmware does not report this":
// no such file, no such device (an attribute of a device going away), and
// the hwmon core's "not supported" and "no data".
func absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV) || errors.Is(err, syscall.ENXIO) ||
		errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENODATA)
}

// openAttr opens a sysfs attribute; -1 with no error when it is absent.
func openAttr(path string) (int, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
		switch {
		case err == unix.EINTR:
			continue
		case err == nil:
			return fd, nil
		case absent(err):
			return -1, nil
		}
		return -1, &fs.PathError{Op: "open", Path: path, Err: err}
	}
}

// pread reads an attribute through its open descriptor from offset 0,
// which makes sysfs produce the value afresh (as after a poll, the sysfs
// documentation's seek-and-re-read). ok is false, with no error, when the
// attribute is gone (ENODEV: its device was unregistered) or reads empty.
func (w *worker) pread(fd int, path string) (b []byte, ok bool, err error) {
	for {
		n, err := unix.Pread(fd, w.buf[:], 0)
		switch {
		case err == unix.EINTR:
			continue
		case err == nil && n == 0:
			// An attribute always holds a value: nothing at all is a
			// device gone away, like ENODEV.
			return nil, false, nil
		case err == nil:
			return trimSpace(w.buf[:n]), true, nil
		case absent(err):
			return nil, false, nil
		}
		return nil, false, &fs.PathError{Op: "read", Path: path, Err: err}
	}
}

// readHeldRaw reads attribute i of the card through its held descriptor.
// An attribute found gone is closed, and a hwmon one has the card look
// for its hwmon directory afresh next time.
func (w *worker) readHeldRaw(c *cardState, i int) ([]byte, bool, error) {
	fd := c.fds[i]
	if fd < 0 {
		return nil, false, nil
	}
	b, ok, err := w.pread(fd, c.paths[i])
	if err != nil {
		return nil, false, err
	}
	if !ok {
		c.closeFDs(i, i+1)
		if i < len(sensors) || (i >= staticMax && i < staticInfo) {
			// The hwmon directory went away (a reset, the driver
			// unregistering it): its sensors are absent from now on,
			// and it is looked for afresh at the next read.
			w.dropHwmon(c)
		}
		return nil, false, nil
	}
	return b, true, nil
}

// readHeld reads a decimal attribute through its held descriptor.
func (w *worker) readHeld(c *cardState, i int) (int64, bool, error) {
	b, ok, err := w.readHeldRaw(c, i)
	if !ok || err != nil {
		return 0, false, err
	}
	v, perr := parseInt(b)
	if perr != nil {
		return 0, false, fmt.Errorf("%s: %q is not a decimal number", c.paths[i], b)
	}
	return v, true, nil
}

// dropHwmon forgets a card's vanished hwmon directory: its descriptors are
// closed, its static values cleared, and the directory is looked for again
// at the next read.
func (w *worker) dropHwmon(c *cardState) {
	c.closeFDs(0, len(sensors))
	c.closeFDs(staticMax, staticInfo)
	c.hwmon, c.staticDue = "", true
	for i := range sensors {
		c.paths[i], c.paths[staticMax+i] = "", ""
	}
	c.static.Arch = ""
	for i := range sensors {
		*sensorOf(&c.static, i) = Sensor{}
	}
}

// readRaw reads the first bytes of a sysfs attribute into r.buf by path
// (an attribute is one value and a newline), for those read only now and
// then. ok is false, with no error, when the attribute is absent.
func (w *worker) readRaw(path string) (b []byte, ok bool, err error) {
	fd, err := openAttr(path)
	if fd < 0 {
		return nil, false, err
	}
	defer unix.Close(fd)
	return w.pread(fd, path)
}

// readString reads a string attribute, kept to printable ASCII and
// maxString bytes, since it becomes a label value.
func (w *worker) readString(path string) (string, bool, error) {
	b, ok, err := w.readRaw(path)
	if !ok || err != nil {
		return "", false, err
	}
	return labelValue(b), true, nil
}

// labelValue keeps a string attribute to printable ASCII and maxString
// bytes, since it becomes a label value.
func labelValue(b []byte) string {
	out := make([]byte, 0, min(len(b), maxString))
	for _, c := range b {
		if len(out) == maxString {
			break
		}
		if c >= 0x20 && c <= 0x7e {
			out = append(out, c)
		}
	}
	return string(out)
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ' || b[len(b)-1] == 0) {
		b = b[:len(b)-1]
	}
	for len(b) > 0 && b[0] == ' ' {
		b = b[1:]
	}
	return b
}

var errNotNumber = errors.New("not a decimal number")

// parseInt parses an optionally negative decimal integer without
// allocating.
func parseInt(b []byte) (int64, error) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg, b = true, b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, errNotNumber
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, errNotNumber
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, nil
}
