package cmdtest

import (
	"os/exec"
	"testing"
)

func TestRun(t *testing.T) {
	t.Parallel()
	r := Run(t, exec.Command("/bin/sh", "-c", "echo out; echo err >&2; exit 3"))
	if r.Code != 3 || r.Stdout != "out\n" || r.Stderr != "err\n" {
		t.Errorf("Run = %+v", r)
	}
	if r := Run(t, exec.Command("/bin/true")); r.Code != 0 {
		t.Errorf("true exited %d", r.Code)
	}
}
