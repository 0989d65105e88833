// Package smoketest starts a fake card host for tests of the smoke test:
// a real queued serving card 0 of a fake KMD tree whose pids file lists
// whoever has the card's device file open, as the KMD does for the real
// node. The smoke test's own tests and the end-to-end test with the real
// otelcol-tt both run on it.
package smoketest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/friendlyname"
	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/queued/api"
)

// Host is a fake card host: a KMD tree whose pids file lists whoever has
// the card's device file open (as the KMD does for the real node), a real
// queued serving card 0.
type Host struct {
	// Tree is the fake KMD tree queued reads (TT_DEVICE_DRIVER_PATH).
	Tree *kmdtest.Tree
	// DevDir holds the card's "device node" Dev, a regular file.
	DevDir, Dev string
	// Client talks to queued over its socket in State.
	Client *api.Client
	State  string
	// Log is queued's output; Python the interpreter for workloads.
	Log    *bytes.Buffer
	Python string
}

// Start starts queued (the binary at queued) on a new fake host; queuedEnv
// adds to its environment (the reset and health check are echo commands).
func Start(t *testing.T, queued string, queuedEnv ...string) *Host {
	t.Helper()
	root := t.TempDir()
	h := &Host{Tree: kmdtest.NewTree(t, filepath.Join(root, "driver")), DevDir: filepath.Join(root, "dev"), Log: &bytes.Buffer{}, Python: kmdtest.Python(t)}
	h.Tree.SetPids(0)
	h.Dev = filepath.Join(h.DevDir, "0")
	if err := os.MkdirAll(h.DevDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.Dev, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); h.fakeKMD(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })

	state, home := filepath.Join(root, "state"), filepath.Join(root, "home")
	h.State = state
	for _, d := range []string{state, home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(queued, "--listen", "127.0.0.1:0")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TT_DEVICE_LOG_DIR=" + state,
		"TT_DEVICE_IDS=0", "TT_DEVICE_KILL_GRACE=1", "TT_DEVICE_DRIVER_PATH=" + h.Tree.Dir,
		"TT_DEVICE_RESET_CMD=echo resetting card {device}", "TT_DEVICE_HEALTH_CHECK_CMD=echo card {device} is healthy"}, queuedEnv...)
	cmd.Stdout, cmd.Stderr = h.Log, h.Log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Errorf("queued did not stop on SIGTERM:\n%s", h.Log)
		}
	})
	h.Client = api.NewUnixClient(filepath.Join(state, api.SocketFile))
	t.Cleanup(h.Client.Close)
	WaitFor(t, 15*time.Second, "queued to answer", func() bool {
		_, err := h.Client.Status(context.Background())
		return err == nil
	})
	return h
}

// fakeKMD keeps card 0's pids file listing the processes that have the
// device file open, one line per descriptor, as the KMD does.
func (h *Host) fakeKMD(ctx context.Context) {
	for {
		var pids []int
		procs, _ := os.ReadDir("/proc")
		for _, p := range procs {
			pid, err := strconv.Atoi(p.Name())
			if err != nil {
				continue
			}
			fds, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
			for _, fd := range fds {
				if target, err := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name())); err == nil && target == h.Dev {
					pids = append(pids, pid)
				}
			}
		}
		h.Tree.SetPids(0, pids...)
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ServeMetrics answers as otelcol-tt's Prometheus exporter would: one
// tt_process series per holder in the pids file, named by friendlyname.
func (h *Host) ServeMetrics(w http.ResponseWriter, _ *http.Request) {
	b, _ := os.ReadFile(h.Tree.PidsPath(0))
	fmt.Fprintln(w, "# HELP tt_process A host process that currently holds an open handle to a Tenstorrent KMD device.")
	fmt.Fprintln(w, "# TYPE tt_process gauge")
	seen := map[string]bool{}
	for _, pid := range strings.Fields(string(b)) {
		if seen[pid] {
			continue
		}
		seen[pid] = true
		raw, err := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		if err != nil {
			continue
		}
		line := strings.TrimSpace(strings.ReplaceAll(string(raw), "\x00", " "))
		fmt.Fprintf(w, "tt_process{command_line=%s,friendly_name=%s,hostname=\"fakehost\",pid=%q} 1\n",
			strconv.Quote(line), strconv.Quote(friendlyname.Derive(line)), pid)
	}
}

// WaitFor polls ok every 20 ms until it holds, failing the test after within.
func WaitFor(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
