package procscan

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// maxPIDsFile bounds a pids file: one line per open file descriptor of at
// most 11 bytes, so 4 MiB is several hundred thousand descriptors. A file
// that reaches it is an error rather than silently cut short.
const maxPIDsFile = 4 << 20

// maxPID bounds a PID line: pid_t is a signed 32-bit integer.
const maxPID = 1<<31 - 1

// listDevices appends to into the numbers of the device directories under
// dir, sorted. Only directories whose name is a canonical decimal number
// count; anything else the driver (or a test) puts there is ignored. A
// missing dir means no KMD is loaded: zero devices and no error.
func listDevices(dir string, into []int) ([]int, error) {
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return into, nil
	}
	if err != nil {
		return into, &ListError{Path: dir, Err: err}
	}
	defer f.Close()
	// f.ReadDir takes the type from the directory entry itself, with no
	// stat per entry, and unlike os.ReadDir does not sort names we are about
	// to sort as numbers anyway.
	entries, err := f.ReadDir(-1)
	if err != nil {
		return into, &ListError{Path: dir, Err: err}
	}
	for _, e := range entries {
		n, ok := parseDeviceName(e.Name())
		if !ok {
			continue
		}
		if e.Type()&fs.ModeSymlink != 0 {
			// A device directory may be a link to the real one: follow
			// it (one stat, only for links).
			if fi, err := os.Stat(dir + "/" + e.Name()); err != nil || !fi.IsDir() {
				continue
			}
		} else if !e.IsDir() {
			continue
		}
		into = append(into, n)
	}
	slices.Sort(into)
	return into, nil
}

// parseDeviceName accepts "0", "1", ... "999999999" and nothing else, so
// that every device number maps back to exactly one directory name.
func parseDeviceName(name string) (int, bool) {
	if len(name) == 0 || len(name) > 9 || (name[0] == '0' && len(name) > 1) {
		return 0, false
	}
	n := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// parsePIDs appends to into the PID on every line of a pids file, in file
// order, duplicates kept. A final newline is optional; any line that is not
// a decimal PID (an empty line included) fails the whole file with a
// *LineError, because a file we do not understand tells us nothing reliable.
func parsePIDs(data []byte, into []int) ([]int, error) {
	for line := 1; len(data) > 0; line++ {
		text := data
		if i := slices.Index(data, '\n'); i >= 0 {
			text, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		pid, ok := parseUint(text, maxPID)
		if !ok {
			return into, &LineError{Line: line, Text: string(text[:min(len(text), maxLineText)])}
		}
		into = append(into, int(pid))
	}
	return into, nil
}

// readFile reads the whole file at path, at most limit bytes of it, into
// *buf, which it grows as needed and leaves grown for the next call. It uses
// plain system calls rather than os.Open: procfs and the KMD's files are
// generated on read, so there is nothing to poll, and skipping the *os.File
// (its poller registration and cleanup) keeps the cost at open, read, close.
func readFile(path string, buf *[]byte, limit int) ([]byte, error) {
	fd, err := open(path)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	b := (*buf)[:0]
	for len(b) < limit {
		if len(b) == cap(b) {
			b = slices.Grow(b, min(max(cap(b), 4096), limit-len(b)))
		}
		n, err := unix.Read(fd, b[len(b):min(cap(b), limit)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			*buf = b
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			break
		}
		b = b[:len(b)+n]
	}
	*buf = b
	return b, nil
}

// open opens path read-only and close-on-exec.
func open(path string) (int, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return fd, nil
	}
}

// readCmdline reads /proc/<pid>/cmdline at path into *buf as readFile
// does, but only as far as the label needs: it stops once the bytes read
// hold more than MaxCommandLine bytes that Sanitize keeps (after any leading
// blanks), or at maxCmdlineRead, the kernel's bound on the argument vector.
// So a line of a few hundred bytes costs one read, and a long run of
// non-printable bytes before the first readable argument still yields it.
func readCmdline(path string, buf *[]byte) ([]byte, error) {
	fd, err := open(path)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	b := (*buf)[:0]
	kept := 0
	for len(b) < maxCmdlineRead && kept <= MaxCommandLine {
		if len(b) == cap(b) {
			b = slices.Grow(b, min(max(cap(b), 4096), maxCmdlineRead-len(b)))
		}
		n, err := unix.Read(fd, b[len(b):min(cap(b), maxCmdlineRead)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			*buf = b
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			break
		}
		for _, c := range b[len(b) : len(b)+n] {
			if (kept > 0 && c == 0) || (c > ' ' && c <= 0x7e) || (kept > 0 && c == ' ') {
				kept++
			}
		}
		b = b[:len(b)+n]
	}
	*buf = b
	return b, nil
}

// errPIDsTooLarge reports a pids file that reached maxPIDsFile.
var errPIDsTooLarge = fmt.Errorf("pids file reached the %d byte limit", maxPIDsFile)
