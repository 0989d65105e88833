// Package ptytest gives tests a pseudo-terminal: a program is given the
// terminal end (as its controlling terminal, or as its output), and the
// test reads what a terminal would have shown from the other end.
package ptytest

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// PTY is a pseudo-terminal pair and what was shown on it so far.
type PTY struct {
	// TTY is the terminal end: the program's stdin, stdout or controlling
	// terminal.
	TTY    *os.File
	master *os.File
	mu     sync.Mutex
	buf    bytes.Buffer
	done   chan struct{}
}

// Open opens a pseudo-terminal, or skips the test where there is none;
// the test's cleanup closes it.
func Open(t testing.TB) *PTY {
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
	p := &PTY{master: m, TTY: tty, done: make(chan struct{})}
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

// Text is everything the terminal showed so far.
func (p *PTY) Text() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.String()
}

// WaitFor polls the screen until it shows s, failing the test after 20s.
func (p *PTY) WaitFor(t testing.TB, s string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(p.Text(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("terminal never showed %q; it showed %q", s, p.Text())
		}
		time.Sleep(5 * time.Millisecond) // polling the screen buffer
	}
}
