package api_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/ttkit/ttkit/queued/api"
)

// TestProbeUnix: a listening socket answers; a missing one and one left
// by a daemon that stopped do not, each with its own error.
func TestProbeUnix(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "live.sock")
	ln, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := api.ProbeUnix(ctx, live); err != nil {
		t.Errorf("a listening socket: %v", err)
	}
	if err := api.ProbeUnix(ctx, filepath.Join(dir, "none.sock")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("no socket: %v, want ENOENT", err)
	}
	stale := filepath.Join(dir, "stale.sock")
	sl, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	sl.(*net.UnixListener).SetUnlinkOnClose(false)
	sl.Close()
	if err := api.ProbeUnix(ctx, stale); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a stale socket: %v, want ECONNREFUSED", err)
	}
}

// BenchmarkProbeUnix is what choosing the daemon adds to each CLI
// command: one connection made and closed.
func BenchmarkProbeUnix(b *testing.B) {
	sock := filepath.Join(b.TempDir(), "q.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ctx := context.Background()
	for b.Loop() {
		if err := api.ProbeUnix(ctx, sock); err != nil {
			b.Fatal(err)
		}
	}
}
