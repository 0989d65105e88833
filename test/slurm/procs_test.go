//go:build slurm

package slurm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/cmdtest"
	"github.com/ttkit/ttkit/internal/porttest"
	"github.com/ttkit/ttkit/internal/usertest"
)

// proc is a daemon the test started: munged, slurmctld, slurmd, queued or
// otelcol-tt, in a process group of its own, its output in a log file that
// is printed when the test fails.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// startProc runs argv with exactly env until stop or the test's end.
func startProc(t *testing.T, name, logPath string, env []string, argv ...string) *proc {
	t.Helper()
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("--- %s (%s) ---\n%s", name, logPath, tail(b, 6000))
		}
	})
	return p
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group and SIGKILL 15 s later. It is
// safe to call twice.
func (p *proc) stop() {
	if p.exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// crash kills the process alone with SIGKILL, as a crash or the OOM
// killer would: what it started lives on.
func (p *proc) crash() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// result is what a command printed and how it exited.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
}

// run runs argv with env (as user u when u is not nil) within a minute.
func run(t *testing.T, u *usertest.User, env []string, argv ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	if u != nil {
		cmd.Env = append([]string{"HOME=" + u.Home, "USER=" + u.Name, "LOGNAME=" + u.Name}, env...)
		cmd.Dir = u.Home
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID}}
	}
	r := cmdtest.Run(t, cmd)
	return result{code: r.Code, stdout: r.Stdout, stderr: r.Stderr}
}

// eventually polls check every 100 ms until it reports done, and fails
// the test with its last word when within passes first.
func eventually(t *testing.T, within time.Duration, what string, check func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, last := check()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last: %s", what, within, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// freePort is a loopback port for one of the test's servers, never one
// handed out before in this run (see porttest).
func freePort(t *testing.T) int { return porttest.Free(t) }

// writeFile writes content with mode, creating the directory.
func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// readFile is the file's content, "" when it cannot be read.
func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// lookTools finds the programs the test runs, or says which is missing.
func lookTools(names ...string) error {
	var missing []string
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s not on PATH (Debian's slurmctld, slurmd, slurm-client and munge packages; .ci/run installs them)", strings.Join(missing, ", "))
	}
	return nil
}
