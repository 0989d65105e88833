package queuedproc

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// RunTests is the TestMain of a suite that runs the real daemon: it builds
// queued once into a temporary directory (or takes $QUEUED_BIN), stores
// the binary's path in *bin, runs the tests, removes the directory and,
// when the tests passed, fails the run on leaked goroutines. It returns
// the code for os.Exit.
func RunTests(m *testing.M, bin *string) int {
	dir, err := os.MkdirTemp("", "queued-suite-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *bin, err = Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}
