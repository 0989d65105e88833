//go:build stress

package stress

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ttkit/ttkit/test/stress/queuedproc"
)

// queuedBin is the daemon under test, built once by TestMain.
var queuedBin string

func TestMain(m *testing.M) { os.Exit(queuedproc.RunTests(m, &queuedBin)) }

// start runs a daemon on a fresh state directory and stops it at the end
// of the test; the daemon's log is printed when the test fails.
func start(t *testing.T, env ...string) *queuedproc.Daemon {
	t.Helper()
	dir := t.TempDir()
	return startIn(t, filepath.Join(dir, "state"), filepath.Join(dir, "queued.log"), "", env...)
}

func startIn(t *testing.T, state, logPath, listen string, env ...string) *queuedproc.Daemon {
	t.Helper()
	d, err := queuedproc.Start(queuedproc.Options{Bin: queuedBin, StateDir: state, LogPath: logPath, Listen: listen, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Stop(30 * time.Second); err != nil {
			t.Errorf("stopping queued: %v", err)
		}
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("queued log:\n%s", tail(b, 4000))
			}
		}
	})
	return d
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
