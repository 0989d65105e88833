package legacyimport

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrInUse refuses a database the Python tool may still be using: the
// import reads a stopped tool's database only, since a live one goes on
// running the jobs the import carries over.
var ErrInUse = errors.New("the Python tt-device-queue is still using it")

// InUseError says why a database is taken to be in use: each item is one
// piece of evidence.
type InUseError struct {
	Path     string
	Evidence []string
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("%s is in use (%s): stop the Python tt-device-queue first (systemctl --user stop tt-device-queue, or end its server.py), then import again",
		e.Path, strings.Join(e.Evidence, "; "))
}

// Is makes errors.Is(err, ErrInUse) true.
func (e *InUseError) Is(target error) bool { return target == ErrInUse }

// probeTimeout bounds the HTTP probe of the tool's port.
const probeTimeout = 2 * time.Second

// checkInUse looks for every sign that a live Python tool (or anything
// else) uses the database, and returns an *InUseError naming those it
// found:
//
//   - a process with the database, its -wal or its -shm open (every
//     /proc/PID/fd this process may read: all, as root);
//   - a lock on the database's lock bytes or on its -shm, which SQLite
//     takes in every process while a connection is open (seen across
//     PID namespaces and users alike);
//   - a Python tt-device-queue server process, however started (see
//     pythonServers), whose state directory
//     (its TT_DEVICE_LOG_DIR, else the logs/ beside server.py) is the
//     database's directory: the tool opens the database only for each
//     operation, so an idle one holds nothing, yet it will run the
//     queue;
//   - the Python tool answering on 127.0.0.1:port (when port is not 0)
//     with jobs of this directory, or with none to tell by.
func checkInUse(s *source, port int) error {
	e := &InUseError{Path: s.path}
	ids := map[[2]uint64]string{}
	for _, p := range []string{s.path, s.path + "-wal", s.path + "-shm"} {
		if fi, err := os.Stat(p); err == nil {
			id := idOf(fi)
			ids[[2]uint64{id.Dev, id.Ino}] = filepath.Base(p)
		}
	}
	e.Evidence = append(e.Evidence, holders(ids)...)
	for _, p := range []string{s.path, s.path + "-shm"} {
		if pid, ok := locked(p, strings.HasSuffix(p, "-shm")); ok {
			e.Evidence = append(e.Evidence, fmt.Sprintf("process %d holds a SQLite lock on %s", pid, filepath.Base(p)))
		}
	}
	e.Evidence = append(e.Evidence, pythonServers(filepath.Dir(s.path))...)
	if port > 0 {
		if ev := probePort(port, filepath.Dir(s.path)); ev != "" {
			e.Evidence = append(e.Evidence, ev)
		}
	}
	if len(e.Evidence) == 0 {
		return nil
	}
	return e
}

// holders lists the processes with one of the files ids open.
func holders(ids map[[2]uint64]string) []string {
	if len(ids) == 0 {
		return nil
	}
	self := strconv.Itoa(os.Getpid())
	procs, _ := os.ReadDir("/proc")
	var out []string
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil || p.Name() == self {
			continue
		}
		fdDir := filepath.Join("/proc", p.Name(), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue // gone, or another user's (only root sees every process's)
		}
		for _, fd := range fds {
			fi, err := os.Stat(filepath.Join(fdDir, fd.Name()))
			if err != nil {
				continue
			}
			id := idOf(fi)
			if name, ok := ids[[2]uint64{id.Dev, id.Ino}]; ok {
				out = append(out, fmt.Sprintf("process %s (%s) has %s open", p.Name(), command(p.Name()), name))
				break
			}
		}
	}
	return out
}

// command is a process's command line, as ps shows it (cut to
// maxCommand bytes), so the refusal says which process to stop; its
// comm when the command line cannot be read (a kernel thread, or gone).
func command(pid string) string {
	raw, _ := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
	line := strings.Join(strings.Fields(strings.ReplaceAll(string(raw), "\x00", " ")), " ")
	if line == "" {
		b, _ := os.ReadFile(filepath.Join("/proc", pid, "comm"))
		return strings.TrimSpace(string(b))
	}
	if len(line) > maxCommand {
		line = line[:maxCommand] + "..."
	}
	return strings.ToValidUTF8(line, "?")
}

// maxCommand bounds the command line quoted in a refusal.
const maxCommand = 160

// sqliteLockBytes is where SQLite's unix VFS takes its locks on a
// database file: the pending byte, the reserved byte and the 510 shared
// bytes from 0x40000000.
const (
	sqliteLockStart = 0x40000000
	sqliteLockLen   = 512 + 2
)

// locked reports whether another process holds a POSIX lock on the
// database's lock bytes, or anywhere on the -shm file (whole). Opening
// the file to ask changes nothing in it; this process holds no lock on it
// to lose by closing.
func locked(path string, whole bool) (int32, bool) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, false
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: sqliteLockStart, Len: sqliteLockLen}
	if whole {
		lk.Start, lk.Len = 0, 0
	}
	if err := unix.FcntlFlock(uintptr(fd), unix.F_GETLK, &lk); err != nil {
		return 0, false
	}
	return lk.Pid, lk.Type != unix.F_UNLCK
}

// pythonServers lists the Python tt-device-queue servers whose state
// directory is dir: a python process, however it was started (python3
// server.py, python3 /elsewhere/server.py, python3 -m server from its
// directory, a copy of the tool at another path), running from a
// directory that has the tool's queue_core.py.
func pythonServers(dir string) []string {
	want, err := os.Stat(dir)
	if err != nil {
		return nil
	}
	self := strconv.Itoa(os.Getpid())
	procs, _ := os.ReadDir("/proc")
	var out []string
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil || p.Name() == self {
			continue
		}
		base := filepath.Join("/proc", p.Name())
		raw, err := os.ReadFile(filepath.Join(base, "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if len(args) < 2 || !strings.Contains(filepath.Base(args[0]), "python") {
			continue
		}
		cwd, _ := os.Readlink(filepath.Join(base, "cwd"))
		for _, repo := range toolDirs(args[1:], cwd) {
			if !hasToolCore(base, repo) {
				continue
			}
			for _, d := range serverDirs(base, repo, cwd) {
				if fi, err := os.Stat(d); err == nil && os.SameFile(fi, want) {
					out = append(out, fmt.Sprintf("the Python tt-device-queue runs as process %s (%s, in %s) on this directory", p.Name(), command(p.Name()), repo))
				}
			}
			break
		}
	}
	return out
}

// toolDirs are the directories a python command line may run the tool
// from: each script's (a .py argument, relative to the working directory
// cwd) and, for python -m MODULE, the working directory, where python
// finds the module.
func toolDirs(args []string, cwd string) []string {
	var out []string
	for i, a := range args {
		switch {
		case a == "-m" && i+1 < len(args), strings.HasPrefix(a, "-m") && len(a) > 2:
			if cwd != "" {
				out = append(out, cwd)
			}
		case strings.HasSuffix(a, ".py"):
			if !filepath.IsAbs(a) {
				a = filepath.Join(cwd, a)
			}
			out = append(out, filepath.Dir(a))
		}
	}
	return out
}

// hasToolCore reports whether repo holds the tool's queue_core.py, as
// the process at base sees its file system or as this one does.
func hasToolCore(base, repo string) bool {
	if _, err := os.Stat(filepath.Join(base, "root", repo, "queue_core.py")); err == nil {
		return true
	}
	_, err := os.Stat(filepath.Join(repo, "queue_core.py"))
	return err == nil
}

// serverDirs are the state directories a server.py in repo may use: its
// TT_DEVICE_LOG_DIR (relative to its working directory), else logs/ and
// logs-v2/ beside it. Reading another process's environment needs its
// user or root; without it both defaults are taken.
func serverDirs(base, repo, cwd string) []string {
	env, err := os.ReadFile(filepath.Join(base, "environ"))
	if err == nil {
		for _, kv := range strings.Split(string(env), "\x00") {
			if v, ok := strings.CutPrefix(kv, "TT_DEVICE_LOG_DIR="); ok && v != "" {
				if !filepath.IsAbs(v) {
					v = filepath.Join(cwd, v)
				}
				return []string{v}
			}
		}
	}
	return []string{filepath.Join(repo, "logs"), filepath.Join(repo, "logs-v2")}
}

// probePort asks 127.0.0.1:port for /status and reports the Python tool
// when it answers (its HTTP server names itself "tt-device-queue/N
// Python/..."), unless the jobs it lists all live in another directory
// than dir. Anything else answering (a queued, a closed port) is not the
// Python tool.
func probePort(port int, dir string) string {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c := http.Client{Timeout: probeTimeout}
	resp, err := c.Get("http://" + addr + "/status")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	srv := resp.Header.Get("Server")
	if !strings.HasPrefix(srv, "tt-device-queue/") || !strings.Contains(srv, "Python") {
		return ""
	}
	var st struct {
		Recent []struct {
			OutputFile string `json:"output_file"`
		} `json:"recent"`
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(body, &st) == nil && len(st.Recent) > 0 {
		mine := false
		want, _ := os.Stat(dir)
		for _, r := range st.Recent {
			fi, err := os.Stat(filepath.Dir(filepath.Dir(r.OutputFile)))
			if err != nil || want == nil || os.SameFile(fi, want) {
				mine = true // the same directory, or one it cannot tell apart
			}
		}
		if !mine {
			return "" // another directory's tool
		}
	}
	return fmt.Sprintf("the Python tt-device-queue answers on %s (%s)", addr, srv)
}
