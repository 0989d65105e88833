package runner

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// asQueuedEnv makes the test binary a stand-in for queued (see
// TestMain): it runs one job, `grep '^SigIgn' /proc/self/status`, in the
// directory the variable names and prints what the job printed.
const asQueuedEnv = "RUNNER_TEST_AS_QUEUED"

// ignoringEnv makes the test binary start queued's stand-in with the
// signals it lists (comma-separated numbers) ignored, as a parent that
// ignored them would (bash's trap cannot ignore 32, which glibc
// keeps for itself, and which the Go runtime leaves as it found it).
const ignoringEnv = "RUNNER_TEST_IGNORING"

// ignoringDirEnv names the directory the stand-in runs its job in.
const ignoringDirEnv = "RUNNER_TEST_IGNORING_DIR"

// ignoringMain ignores the signals list names and becomes the stand-in
// for queued, which inherits them ignored across the execve.
func ignoringMain(list, dir string) int {
	ign := [4]uint64{1} // struct sigaction: SIG_IGN
	for _, f := range strings.Split(list, ",") {
		sig, err := strconv.Atoi(f)
		if err != nil {
			fmt.Fprintf(os.Stderr, "signal %q: %v\n", f, err)
			return 2
		}
		if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&ign)), 0, 8, 0, 0); e != 0 {
			fmt.Fprintf(os.Stderr, "ignoring signal %d: %v\n", sig, e)
			return 2
		}
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, ignoringEnv+"=") {
			env = append(env, kv)
		}
	}
	err = syscall.Exec(self, []string{self}, append(env, asQueuedEnv+"="+dir))
	fmt.Fprintln(os.Stderr, err)
	return 2
}

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
// its whole grace for SIGTERM. So did a signal the Go runtime never
// touches (32, which a CI runner's parent had ignored). A job starts with
// every signal's default disposition, whatever queued inherited.
func TestRun_JobDoesNotInheritQueuedsIgnoredSignals(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// An ignored signal stays ignored across execve.
	cmd := exec.Command(self)
	cmd.Env = append(testEnv(), ignoringEnv+"=1,2,3,13,32,40,64", ignoringDirEnv+"="+dir)
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
