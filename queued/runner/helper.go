package runner

import (
	"os"

	"github.com/ttkit/ttkit/queued/execjob"
)

// ServeExecJob makes this process the exec helper (see package execjob)
// when it was started as one (arguments "exec-job" and nothing else) and
// returns otherwise. queued's main calls it first, for a host where
// queued-exec is not installed beside queued, and so does the TestMain of
// every test binary that runs programs through this package in-process:
// there the helper is the test binary itself, re-executed. Started as a
// helper, it never returns: it becomes the program, or exits with status
// 127 after reporting why it could not.
func ServeExecJob() {
	if len(os.Args) != 2 || os.Args[1] != execjob.Arg {
		return
	}
	os.Exit(execjob.Main())
}
