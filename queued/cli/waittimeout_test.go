package cli_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestWaitTimeoutZeroIsDocumented: --wait-timeout 0 waits without limit
// (as GNU timeout reads 0), and every command that has the flag says so.
func TestWaitTimeoutZeroIsDocumented(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"run", "result", "queue-python"} {
		out, err := exec.Command(filepath.Join(bin, "tt-device-queue"), cmd, "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --help: %v\n%s", cmd, err, out)
		}
		help := strings.Join(strings.Fields(string(out)), " ")
		if !strings.Contains(help, "0 (the default) waits without limit") {
			t.Errorf("%s --help does not say what --wait-timeout 0 does:\n%s", cmd, out)
		}
	}
}
