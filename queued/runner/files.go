package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// Output files are written by queued, which in system mode is root, in a
// directory a job's user cannot write to. They are still opened as if
// someone could plant a link there, so no link can turn root's write into
// a write to another file: a new file replaces whatever is at its path
// (a symlink, a hard link to another file) and is created exclusively,
// and a file that is appended to or read is opened without following a
// symlink and must be a regular file of one link.

// createFile unlinks what is at path (not a directory) and creates a new
// file there, 0600.
func createFile(path string, flag int) (*os.File, error) {
	if err := syscall.Unlink(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("replacing %s: %w", path, err)
	}
	// O_NONBLOCK, which a regular file ignores, spares os.OpenFile making
	// the descriptor non-blocking for its poller, which refuses a regular
	// file, and blocking again: four system calls for each job's log.
	return os.OpenFile(path, flag|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
}

// openExisting opens the file at path with flag, not following a symlink,
// and checks that it is a regular file with no other link.
func openExisting(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !fi.Mode().IsRegular() || (ok && st.Nlink > 1) {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file of its own (%v): %w", path, fi.Mode().Type(), fs.ErrInvalid)
	}
	return f, nil
}
