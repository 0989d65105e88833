package runner

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// A helper that cannot start at all leaves nothing behind, whatever the
// size of its request (one past the pipe's buffer is written by a
// goroutine): no goroutine, no descriptor, and an error that names the
// helper's start.
func TestRun_AHelperThatCannotStartLeavesNothingBehind(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b := setup(t, 1<<20)
	big := "BIG=" + strings.Repeat("x", 256<<10) // past the pipe's 64 KiB
	fds := func() int {
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	before := fds()
	for name, env := range map[string][]string{"small": testEnv(), "large": append(testEnv(), big)} {
		spec := b.spec("echo never")
		spec.Env = env
		spec.Helper = filepath.Join(b.dir, "no-such-helper")
		res := Run(spec, b.log, nil)
		if res.ExitCode != -1 || res.Iterations != 0 || !errors.Is(res.Err, fs.ErrNotExist) ||
			!strings.Contains(res.Err.Error(), "exec helper") {
			t.Errorf("%s request: exit %d, %d iterations, error %v; want -1, none, and the helper's start named", name, res.ExitCode, res.Iterations, res.Err)
		}
		if n := fds(); n != before {
			t.Errorf("%s request: %d descriptors open after the failed start, %d before", name, n, before)
		}
	}
}
