package runner

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/internal/cputest"
	"github.com/ttkit/ttkit/queued/cpupin"
)

// keptEnv makes the test binary a stand-in for a queued that keeps its
// threads to the CPU the variable names (package cpupin): it starts a
// spare and prints the CPUs the spare may use while it waits.
const keptEnv = "RUNNER_TEST_KEPT"

func keptMain(cpu string) int {
	if _, err := cpupin.Keep(cpu); err != nil {
		fmt.Println("keeping:", err)
		return 1
	}
	sp, err := startSpare("kept", defaultHelper())
	if err != nil {
		fmt.Println("starting a spare:", err)
		return 1
	}
	defer sp.discard()
	list, err := cputest.Allowed(fmt.Sprintf("/proc/%d", sp.proc.PID))
	if err != nil {
		fmt.Println("reading the spare's CPUs:", err)
		return 1
	}
	fmt.Printf("spare=%s\n", list)
	return 0
}

// A spare waits for its job beside queued's work, for as long as the job
// before it runs, and with the Go build of the helper it starts a Go
// runtime meanwhile: a queued kept to one CPU must not keep its spares
// there, whether its spawner forked them (the C build) or queued did.
func TestSpare_WaitsOnEveryCPUQueuedStartedWith(t *testing.T) {
	t.Parallel()
	ours := cputest.NeedTwo(t)
	last := cputest.Last(ours)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(testEnv(), keptEnv+"="+strconv.Itoa(last))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the stand-in queued: %v\n%s", err, out)
	}
	if want := "spare=" + cpupin.List(ours) + "\n"; !strings.Contains(string(out), want) {
		t.Errorf("a spare of a queued kept to CPU %d: %q, want %q", last, out, want)
	}
}
