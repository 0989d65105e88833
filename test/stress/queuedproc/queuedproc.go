// Package queuedproc builds the real queued binary and runs it as a child
// process for the stress, security and bench suites, so they exercise
// exactly what users run: the same flags, environment, token and address
// files, and a process whose CPU time and memory can be read from /proc.
package queuedproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc/<pid>/stat; it
// is 100 on every Linux architecture Go supports.
const clockTicks = 100

// readyTimeout bounds how long Start waits for the daemon to write its
// address file.
const readyTimeout = 15 * time.Second

// ModuleRoot returns the directory of the ttkit module, so the suites
// can build queued wherever `go test` or `go run` was started.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("go env GOMOD: not inside the ttkit module")
	}
	return filepath.Dir(gomod), nil
}

// BinEnv names an environment variable that, when set, gives a queued
// binary to use instead of building one (to test an installed or older
// build).
const BinEnv = "QUEUED_BIN"

// Build compiles ./queued/cmd/queued into dir and returns the binary's
// path, or returns $QUEUED_BIN when that is set.
func Build(dir string) (string, error) {
	if bin := os.Getenv(BinEnv); bin != "" {
		return filepath.Abs(bin)
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	return BuildFrom(root, dir)
}

// BuildFrom builds queued and queued-exec from the source tree at root
// (this module, or a checkout of another revision of it) into dir and
// returns the queued binary's path.
func BuildFrom(root, dir string) (string, error) {
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./queued/cmd/queued", "./queued/cmd/queued-exec")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building queued in %s: %w\n%s", root, err, out)
	}
	return filepath.Join(dir, "queued"), nil
}

// FreePort returns a loopback TCP port that was free a moment ago, for a
// daemon that must come back on the same address after a restart.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Options describe one daemon process.
type Options struct {
	// Bin is the queued binary (see Build). Required.
	Bin string
	// StateDir is TT_DEVICE_LOG_DIR. Required.
	StateDir string
	// Listen is the listen address; default 127.0.0.1:0 (any free port).
	Listen string
	// Devices is TT_DEVICE_IDS; default "0,1".
	Devices string
	// Env adds NAME=VALUE pairs to the daemon's (and so every job's)
	// environment, which otherwise holds only PATH, HOME and the two
	// settings above.
	Env []string
	// LogPath receives the daemon's stderr, appended across restarts;
	// default discarded.
	LogPath string
}

// Daemon is one running queued process.
type Daemon struct {
	// Pid is the daemon's process id.
	Pid int
	// URL is the base URL from its address file.
	URL string
	// Token is the bearer token from its state directory.
	Token string

	opts    Options
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	logFile *os.File
}

// Start runs queued and waits until it has written its address file.
func Start(o Options) (*Daemon, error) {
	d, err := Launch(o)
	if err != nil {
		return nil, err
	}
	if err := d.WaitReady(); err != nil {
		d.Kill()
		return nil, err
	}
	return d, nil
}

// Launch runs queued without waiting for it to be ready, for tests that
// kill it while it starts; WaitReady waits. A stale address file left by a
// killed daemon is removed first, so the one found later is this
// process's.
func Launch(o Options) (*Daemon, error) {
	if o.Bin == "" || o.StateDir == "" {
		return nil, errors.New("queuedproc: Bin and StateDir are required")
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	if o.Devices == "" {
		o.Devices = "0,1"
	}
	addrPath := filepath.Join(o.StateDir, api.AddressFile)
	if err := os.Remove(addrPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing stale address file: %w", err)
	}
	d := &Daemon{opts: o, exited: make(chan struct{})}
	cmd := exec.Command(o.Bin, "--listen", o.Listen)
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"TT_DEVICE_IDS=" + o.Devices,
		"TT_DEVICE_LOG_DIR=" + o.StateDir,
	}, o.Env...)
	cmd.Stdout = io.Discard
	cmd.Stderr = io.Discard
	if o.LogPath != "" {
		f, err := os.OpenFile(o.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("opening daemon log: %w", err)
		}
		d.logFile = f
		cmd.Stderr = f
	}
	if err := cmd.Start(); err != nil {
		d.closeLog()
		return nil, fmt.Errorf("starting queued: %w", err)
	}
	d.cmd, d.Pid = cmd, cmd.Process.Pid
	go func() {
		d.waitErr = cmd.Wait()
		d.closeLog()
		close(d.exited)
	}()
	return d, nil
}

func (d *Daemon) closeLog() {
	if d.logFile != nil {
		d.logFile.Close()
	}
}

// WaitReady polls for the address file with a deadline, giving up at once
// if the daemon exits, and then reads the URL and token.
func (d *Daemon) WaitReady() error {
	addrPath := filepath.Join(d.opts.StateDir, api.AddressFile)
	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(addrPath); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			d.URL = strings.TrimSpace(string(b))
			tok, err := api.ReadToken(d.opts.StateDir)
			if err != nil {
				return err
			}
			d.Token = tok
			return nil
		}
		select {
		case <-d.exited:
			return fmt.Errorf("queued exited before it was ready: %v (see %s)", d.waitErr, d.opts.LogPath)
		case <-deadline.C:
			return fmt.Errorf("queued wrote no address file within %s (see %s)", readyTimeout, d.opts.LogPath)
		case <-tick.C:
		}
	}
}

// Client returns a new API client for the daemon.
func (d *Daemon) Client() *api.Client { return api.NewClient(d.URL, d.Token) }

// Exited is closed once the process has exited and been reaped.
func (d *Daemon) Exited() <-chan struct{} { return d.exited }

// Kill sends SIGKILL and waits for the process to be reaped. It is safe
// to call on a daemon that already exited.
func (d *Daemon) Kill() {
	d.cmd.Process.Signal(syscall.SIGKILL) // fails only if it is gone already
	<-d.exited
}

// Stop sends SIGTERM (queued's graceful stop) and waits up to timeout for
// the exit, then SIGKILL. It returns an error if the daemon had to be
// killed or exited with a failure.
func (d *Daemon) Stop(timeout time.Duration) error {
	select {
	case <-d.exited:
		return d.waitErr
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-d.exited:
		return d.waitErr
	case <-t.C:
		d.Kill()
		return fmt.Errorf("queued did not stop within %s of SIGTERM; killed", timeout)
	}
}

// Usage is a process's resource use so far, from /proc.
type Usage struct {
	// CPU is user plus system time of the daemon itself.
	CPU time.Duration
	// ChildCPU is the CPU time of the children it has reaped (the jobs).
	ChildCPU time.Duration
	// RSS is the resident set now; PeakRSS its high-water mark (VmHWM).
	RSS, PeakRSS int64
	// RSSAnon and RSSFile split RSS: the process's own memory (the Go
	// heap and stacks) and the pages of files it maps (bbolt's file)
	// that it has touched, which count as resident too.
	RSSAnon, RSSFile int64
}

// Usage reads the daemon's CPU time and memory.
func (d *Daemon) Usage() (Usage, error) { return ReadUsage(d.Pid) }

// ReadUsage reads any process's CPU time and memory from /proc.
func ReadUsage(pid int) (Usage, error) {
	var u Usage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, fmt.Errorf("reading stat of pid %d: %w", pid, err)
	}
	// The command name may contain spaces and parentheses; the fields
	// after the last ')' start at field 3 (state).
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return u, fmt.Errorf("reading stat of pid %d: malformed", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 15 {
		return u, fmt.Errorf("reading stat of pid %d: %d fields", pid, len(f))
	}
	ticks := func(s string) time.Duration {
		n, _ := strconv.ParseInt(s, 10, 64)
		return time.Duration(n) * time.Second / clockTicks
	}
	// utime, stime, cutime, cstime are fields 14-17: f[11..14].
	u.CPU = ticks(f[11]) + ticks(f[12])
	u.ChildCPU = ticks(f[13]) + ticks(f[14])
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, fmt.Errorf("reading status of pid %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		switch name {
		case "VmRSS":
			u.RSS = kb << 10
		case "VmHWM":
			u.PeakRSS = kb << 10
		case "RssAnon":
			u.RSSAnon = kb << 10
		case "RssFile":
			u.RSSFile = kb << 10
		}
	}
	return u, nil
}

// ResetPeak resets the process's RSS high-water mark (VmHWM) to its RSS
// now, so a later Usage's PeakRSS is the peak since (Linux 4.0 and
// later; needs the right to write /proc/<pid>/clear_refs: its owner or
// root).
func ResetPeak(pid int) error {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return fmt.Errorf("resetting the peak RSS of pid %d: %w", pid, err)
	}
	return nil
}

// MiB formats a byte count in MiB.
func MiB(n int64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB" }

// Gate is a job that holds its card until Open: it blocks reading a FIFO,
// so it costs nothing while it waits and needs no polling.
type Gate struct {
	// Path is the FIFO.
	Path string
	// Cmd is the shell program that waits on it.
	Cmd string
}

// NewGate makes a FIFO at path.
func NewGate(path string) (*Gate, error) {
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		return nil, fmt.Errorf("making gate FIFO %s: %w", path, err)
	}
	return &Gate{Path: path, Cmd: "read -r _ < " + shellQuote(path)}, nil
}

// Open releases the job waiting on the gate. It waits (up to ctx) for a
// reader, so call it once the gate job is running.
func (g *Gate) Open(ctx context.Context) error {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		// O_NONBLOCK: fails with ENXIO while nobody reads, never blocks.
		f, err := os.OpenFile(g.Path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			_, err = f.WriteString("open\n")
			f.Close()
			return err
		}
		if !errors.Is(err, syscall.ENXIO) {
			return fmt.Errorf("opening gate %s: %w", g.Path, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("opening gate %s: no reader: %w", g.Path, ctx.Err())
		case <-tick.C:
		}
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
