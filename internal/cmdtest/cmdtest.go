// Package cmdtest runs a command to its end for a test and keeps what it
// printed and how it exited, so that tests of the CLI, of the Slurm
// scripts and of queued under Slurm judge a run the same way: an exit
// status is a result to check, a command that cannot start at all fails
// the test.
package cmdtest

import (
	"bytes"
	"errors"
	"os/exec"
	"testing"
)

// Result is one finished run: its exit status (0 when it succeeded) and
// everything it wrote to stdout and stderr.
type Result struct {
	Code           int
	Stdout, Stderr string
}

// Run runs cmd, whose Stdout and Stderr it sets, and waits for it. An
// exit status other than 0 is returned in the Result; a command that
// could not be started, or whose end could not be read, fails t.
func Run(t testing.TB, cmd *exec.Cmd) Result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := Result{Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	default:
		t.Fatalf("running %s: %v", cmd, err)
	}
	return r
}
