//go:build chromium

package browser

import (
	"os"
	"os/exec"
	"testing"

	"github.com/ttkit/ttkit/test/stress/queuedproc"
)

// queuedBin is the daemon under test, built once by TestMain.
var queuedBin string

func TestMain(m *testing.M) { os.Exit(queuedproc.RunTests(m, &queuedBin)) }

// findChromium returns Debian's chromium (or CHROMIUM); CI installs it.
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("skipping: no chromium binary on PATH (install Debian's chromium package or set CHROMIUM)")
	return ""
}
