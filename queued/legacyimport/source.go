package legacyimport

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ttkit/ttkit/queued/account"
)

// ErrUnsafe refuses a database or file that the import will not read for
// whom it runs: a symbolic link, something other than a regular file, a
// file of another user, or, in system mode, a database of root's.
var ErrUnsafe = errors.New("refused")

// fileID is what identifies one version of a file without reading it.
type fileID struct {
	Exists  bool   `json:"exists"`
	Dev     uint64 `json:"dev,omitempty"`
	Ino     uint64 `json:"ino,omitempty"`
	Size    int64  `json:"size,omitempty"`
	MtimeNS int64  `json:"mtime_ns,omitempty"`
}

// idOf is fi's identity.
func idOf(fi fs.FileInfo) fileID {
	st, _ := fi.Sys().(*syscall.Stat_t)
	id := fileID{Exists: true, Size: fi.Size(), MtimeNS: fi.ModTime().UnixNano()}
	if st != nil {
		id.Dev, id.Ino = uint64(st.Dev), st.Ino
	}
	return id
}

// lstatID is the identity of whatever is at path, not following a link;
// a missing file is the zero fileID.
func lstatID(path string) (fileID, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fileID{}, nil
	}
	if err != nil {
		return fileID{}, err
	}
	return idOf(fi), nil
}

// mtime is the identity's modification time; zero for a missing file.
func (f fileID) mtime() time.Time {
	if !f.Exists {
		return time.Time{}
	}
	return time.Unix(0, f.MtimeNS)
}

// source is the Python tool's database as found: the file, its WAL, and
// the user it belongs to, for whom it is read.
type source struct {
	path  string // the jobs.sqlite3 file
	owner account.Account
	// asOwner: the files are opened with the owner's file-system identity
	// (this process is root and the owner is not).
	asOwner bool
	db, wal fileID
}

// openSource checks the database at path and who it belongs to. The
// owner of the file (not of a link to it: a link is refused) is whose
// database it is: in system mode the imported jobs become that user's,
// and root's database is refused, since system mode never imports jobs to
// run as root; in user mode the jobs will run as the user importing, so
// the database must be theirs.
func openSource(path string, system bool) (*source, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("the Python tt-device-queue's database: %w", err)
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("%s is a symbolic link: give the database file itself: %w", path, ErrUnsafe)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file (%v): %w", path, fi.Mode().Type(), ErrUnsafe)
	}
	st := fi.Sys().(*syscall.Stat_t)
	me := uint32(os.Geteuid())
	switch {
	case system && st.Uid == 0:
		return nil, fmt.Errorf("%s belongs to root: system mode imports a database as its owner's jobs and never as root's; chown it to the user whose database it is: %w", path, ErrUnsafe)
	case !system && st.Uid != me:
		return nil, fmt.Errorf("%s belongs to %s (uid %d), not to you (uid %d): imported into a user-mode queued its jobs would run as you; import it as that user, or into the system-mode queued (tt-device-queue import --system): %w",
			path, account.Name(st.Uid), st.Uid, me, ErrUnsafe)
	}
	owner, err := account.LookupUID(st.Uid)
	if err != nil {
		if !system && errors.Is(err, account.ErrUnknownUser) {
			owner = account.Account{UID: st.Uid, GID: st.Gid, Name: fmt.Sprintf("uid %d", st.Uid)}
		} else {
			return nil, fmt.Errorf("the owner of %s: %w", path, err)
		}
	}
	s := &source{path: path, owner: owner, asOwner: me == 0 && st.Uid != 0, db: idOf(fi)}
	if s.wal, err = lstatID(path + "-wal"); err != nil {
		return nil, fmt.Errorf("the Python tt-device-queue's database: %w", err)
	}
	return s, nil
}

// do runs fn with the owner's file-system identity when the import runs
// as root for another user: on an OS thread of its own whose fsuid, fsgid
// and groups are the owner's, so every path fn opens is resolved and
// checked by the kernel as the owner would open it (their directories'
// permissions, links through directories they cannot enter); root's
// file-system capabilities are dropped with the fsuid. The thread is
// locked and never unlocked, so it ends with fn and its identity with it.
// Descriptors fn opens stay usable afterwards.
func (s *source) do(fn func() error) error {
	if !s.asOwner {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		groups := make([]int, len(s.owner.Groups))
		for i, g := range s.owner.Groups {
			groups[i] = int(g)
		}
		if err := unix.Setgroups(groups); err != nil {
			done <- fmt.Errorf("taking the groups of %s: %w", s.owner.Name, err)
			return
		}
		unix.Setfsgid(int(s.owner.GID))
		unix.Setfsuid(int(s.owner.UID))
		// setfsuid reports no failure; asking again with an invalid id
		// returns the current one.
		if cur, _ := unix.SetfsuidRetUid(-1); cur != int(s.owner.UID) {
			done <- fmt.Errorf("taking the identity of %s: fsuid is %d", s.owner.Name, cur)
			return
		}
		if cur, _ := unix.SetfsgidRetGid(-1); cur != int(s.owner.GID) {
			done <- fmt.Errorf("taking the identity of %s: fsgid is %d", s.owner.Name, cur)
			return
		}
		done <- fn()
	}()
	return <-done
}

// openOwned opens the regular file at path for reading, as the owner
// (see do), and only if it is the owner's, in a directory of the
// owner's: a symbolic link (in its last component), a FIFO, a device, a
// directory, another user's file and a file in another user's directory
// are refused before anything is read, and a device or FIFO is never
// opened (it is looked at through an O_PATH descriptor first, which opens
// nothing). wantID, when it exists, is the identity the file must still
// have.
func (s *source) openOwned(path string, wantID fileID) (*os.File, fs.FileInfo, error) {
	var f *os.File
	var fi fs.FileInfo
	err := s.do(func() error {
		dir, err := os.Open(filepath.Dir(path))
		if err != nil {
			return err
		}
		defer dir.Close()
		dfi, err := dir.Stat()
		if err != nil {
			return err
		}
		if !dfi.IsDir() {
			return fmt.Errorf("%s is not a directory: %w", filepath.Dir(path), ErrUnsafe)
		}
		if uid := dfi.Sys().(*syscall.Stat_t).Uid; uid != s.owner.UID {
			return fmt.Errorf("%s is in %s, a directory of %s (uid %d), not of %s who owns the database: %w",
				path, filepath.Dir(path), account.Name(uid), uid, s.owner.Name, ErrUnsafe)
		}
		pfd, err := unix.Openat(int(dir.Fd()), filepath.Base(path), unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return &fs.PathError{Op: "open", Path: path, Err: err}
		}
		defer unix.Close(pfd)
		var st unix.Stat_t
		if err := unix.Fstat(pfd, &st); err != nil {
			return &fs.PathError{Op: "stat", Path: path, Err: err}
		}
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			return fmt.Errorf("%s is a symbolic link: %w", path, ErrUnsafe)
		case st.Mode&unix.S_IFMT != unix.S_IFREG:
			return fmt.Errorf("%s is not a regular file (mode %#o): %w", path, st.Mode&unix.S_IFMT, ErrUnsafe)
		case st.Uid != s.owner.UID:
			return fmt.Errorf("%s belongs to %s (uid %d), not to %s who owns the database: %w", path, account.Name(st.Uid), st.Uid, s.owner.Name, ErrUnsafe)
		}
		// Reopen the very inode the O_PATH descriptor names (a path
		// swapped meanwhile changes nothing), for reading.
		fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", pfd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			return &fs.PathError{Op: "open", Path: path, Err: err}
		}
		f = os.NewFile(uintptr(fd), path)
		if fi, err = f.Stat(); err != nil {
			f.Close()
			return err
		}
		if !fi.Mode().IsRegular() || uint64(fi.Sys().(*syscall.Stat_t).Ino) != st.Ino {
			f.Close()
			return fmt.Errorf("%s changed while it was opened: %w", path, ErrUnsafe)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if wantID.Exists {
		if got := idOf(fi); got.Dev != wantID.Dev || got.Ino != wantID.Ino {
			f.Close()
			return nil, nil, fmt.Errorf("%s was replaced while it was read: %w", path, ErrInUse)
		}
	}
	return f, fi, nil
}
