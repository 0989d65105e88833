package kmdtest

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Fifo replaces path with a named pipe: reading it blocks until a writer
// comes, as a read of /proc/<pid>/cmdline does while the target is stuck
// in the kernel holding its mmap lock, or a pids file the driver never
// answers. release writes content and closes, which lets the blocked
// reader finish; it runs at cleanup too, so nothing leaks.
func Fifo(tb testing.TB, path string) (release func(content string)) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	_ = os.Remove(path)
	if err := unix.Mkfifo(path, 0o644); err != nil {
		tb.Fatal(err)
	}
	done := false
	release = func(content string) {
		if done {
			return
		}
		done = true
		// Blocks until the reader has opened its end; the reader is
		// already waiting in open (or will be), so this returns.
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			tb.Errorf("opening %s for writing: %v", path, err)
			return
		}
		_, _ = f.WriteString(content)
		_ = f.Close()
	}
	tb.Cleanup(func() { release("") })
	return release
}
