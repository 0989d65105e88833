package runner

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// asQueuedEnv makes the test binary a stand-in for queued (see
// TestMain): it runs one job, `grep '^SigIgn' /proc/self/status`, in the
// directory the variable names and prints what the job printed.
const asQueuedEnv = "RUNNER_TEST_AS_QUEUED"

// asQueuedMain is that stand-in: whatever signals it was started with
// ignored, it starts the job the way queued does.
func asQueuedMain(dir string) int {
	l := NewLog(filepath.Join(dir, "out.log"), 1<<20)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, asQueuedEnv+"=") && !strings.HasPrefix(kv, JobEnvVar+"=") {
			env = append(env, kv)
		}
	}
	res := Run(Spec{Shell: Shell(), Cmd: "grep '^SigIgn' /proc/self/status", Dir: dir, Env: env}, l, nil)
	l.Close()
	out, _ := os.ReadFile(filepath.Join(dir, "out.log"))
	fmt.Printf("exit=%d err=%v %s", res.ExitCode, res.Err, out)
	return 0
}

// A queued started with SIGINT and SIGHUP ignored (`nohup`, or `&` in a
// script, which ignores SIGINT and SIGQUIT) used to hand both on to every
// job: the kill ladder's first rung, SIGINT, which tt-metal handles by
// closing the device, then did nothing, and a kill or a reset waited
// its whole grace for SIGTERM. A job starts with every signal's default
// disposition, whatever queued inherited.
func TestRun_JobDoesNotInheritQueuedsIgnoredSignals(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// bash's `trap ''` ignores a signal, and execve keeps it ignored.
	cmd := exec.Command("bash", "-c", `trap '' INT HUP QUIT PIPE; exec "$0"`, self)
	cmd.Env = append(testEnv(), asQueuedEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	text := string(out)
	if !strings.Contains(text, "exit=0 err=<nil>") {
		t.Fatalf("the job did not run: %q", text)
	}
	ign, ok := strings.CutPrefix(strings.TrimSpace(text[strings.Index(text, "SigIgn:"):]), "SigIgn:")
	if !ok {
		t.Fatalf("no SigIgn in %q", text)
	}
	mask, err := strconv.ParseUint(strings.TrimSpace(ign), 16, 64)
	if err != nil {
		t.Fatalf("SigIgn %q: %v", ign, err)
	}
	if mask != 0 {
		var names []string
		for sig := 1; sig <= 64; sig++ {
			if mask&(1<<(sig-1)) != 0 {
				names = append(names, strconv.Itoa(sig))
			}
		}
		t.Fatalf("the job started with signals %s ignored (SigIgn %016x)", strings.Join(names, ","), mask)
	}
}
