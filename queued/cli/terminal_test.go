package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pty is a pseudo-terminal: the CLI writes to tty, the test reads what a
// terminal would have shown.
type pty struct {
	master, tty *os.File
	mu          sync.Mutex
	buf         bytes.Buffer
	done        chan struct{}
}

func openPTY(t *testing.T) *pty {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := &pty{master: m, tty: tty, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		b := make([]byte, 4096)
		for {
			n, err := m.Read(b)
			p.mu.Lock()
			p.buf.Write(b[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { m.Close(); tty.Close(); <-p.done })
	return p
}

func (p *pty) text() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.String()
}

// waitFor polls the screen for s for at most 20s.
func (p *pty) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(p.text(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("terminal never showed %q; it showed %q", s, p.text())
		}
		select {
		case <-p.done:
			if !strings.Contains(p.text(), s) {
				t.Fatalf("terminal closed without %q; it showed %q", s, p.text())
			}
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// runOnTTY runs the CLI with stdout or stderr on the terminal.
func (d *daemon) runOnTTY(t *testing.T, p *pty, stderr bool, env []string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cmd := d.command(ctx, env, args...)
	var other bytes.Buffer
	if stderr {
		cmd.Stdout, cmd.Stderr = &other, p.tty
	} else {
		cmd.Stdout, cmd.Stderr = p.tty, &other
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &other
}

func TestRun_LiveProgressLineOnATerminal(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	g := newGate(t)
	defer g.open(t)
	d.run("queue", "--", g.wait()).want(t, 0, nil, nil)
	p := openPTY(t)
	cmd, out := d.runOnTTY(t, p, true, nil, "run", "--", "echo done")
	p.waitFor(t, "\r\x1b[Ktt-device-queue: job ")
	p.waitFor(t, "waiting for card 0: position 1, estimated wait")
	g.open(t)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v; terminal: %q", err, p.text())
	}
	if out.String() != "done\n" {
		t.Fatalf("stdout = %q", out.String())
	}
	if !strings.HasSuffix(p.text(), "\r\x1b[K") {
		t.Fatalf("the progress line was not cleared when the job started: %q", p.text())
	}
}

func TestStatus_ColourOnlyOnATerminalWithoutNoColor(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	p := openPTY(t)
	cmd, _ := d.runOnTTY(t, p, false, nil, "status")
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, "\x1b[32mhealthy")

	q := openPTY(t)
	cmd, _ = d.runOnTTY(t, q, false, []string{"NO_COLOR=1"}, "status")
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	q.waitFor(t, "of at most 1000 jobs queued")
	if strings.Contains(q.text(), "\x1b[") {
		t.Fatalf("NO_COLOR=1 and still coloured: %q", q.text())
	}
}

// TestReset_AsksOnATerminal: a bare reset at a terminal lists the running
// jobs it would interrupt and asks; no resets nothing, yes resets, --yes
// does not ask. Without a terminal it resets at once (TestReset).
func TestReset_AsksOnATerminal(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	g := newGate(t)
	defer g.open(t)
	id := strings.TrimSpace(d.run("queue", "--", "echo busy; "+g.wait()).stdout)
	d.waitState(id, "running")

	ask := func(answer string) (*exec.Cmd, *pty) {
		p := openPTY(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		cmd := d.command(ctx, nil, "reset")
		cmd.Stdin, cmd.Stderr = p.tty, p.tty
		cmd.Stdout = &bytes.Buffer{}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p.waitFor(t, "Reset every card? [y/N]")
		p.master.Write([]byte(answer + "\n"))
		return cmd, p
	}
	cmd, p := ask("n")
	if err := cmd.Wait(); cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("declined reset: %v; terminal %q", err, p.text())
	}
	for _, want := range []string{"This resets every card (0, 1).", "It interrupts these running jobs:", "card 0: job " + id[:8], "echo busy", "nothing was reset"} {
		p.waitFor(t, want)
	}
	if st := d.waitState(id, "running"); st.State != "running" {
		t.Fatalf("job after a declined reset: %+v", st)
	}
	cmd, p = ask("yes")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("confirmed reset: %v; terminal %q", err, p.text())
	}
	if out := cmd.Stdout.(*bytes.Buffer).String(); !strings.Contains(out, "card 0: reset") || !strings.Contains(out, "interrupts running job "+id) {
		t.Fatalf("confirmed reset printed %q", out)
	}
	// --yes asks nothing, even on a terminal.
	q := openPTY(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	yes := d.command(ctx, nil, "reset", "--yes")
	yes.Stdin, yes.Stderr, yes.Stdout = q.tty, q.tty, &bytes.Buffer{}
	if err := yes.Run(); err != nil || strings.Contains(q.text(), "[y/N]") {
		t.Fatalf("reset --yes: %v; terminal %q", err, q.text())
	}
}
