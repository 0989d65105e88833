package runner

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// freeFD returns a descriptor number at or above from, with the one below
// it free too.
func freeFD(t *testing.T, from int) int {
	t.Helper()
	for n := from; n < from+1000; n += 2 {
		_, e1 := unix.FcntlInt(uintptr(n-1), unix.F_GETFD, 0)
		_, e2 := unix.FcntlInt(uintptr(n), unix.F_GETFD, 0)
		if errors.Is(e1, unix.EBADF) && errors.Is(e2, unix.EBADF) {
			return n
		}
	}
	t.Fatalf("no two free descriptors from %d", from)
	return 0
}

// moveFD puts f's descriptor at n and returns it as a file there.
func moveFD(t *testing.T, f *os.File, n int) *os.File {
	t.Helper()
	if err := unix.Dup3(int(f.Fd()), n, unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	f.Close()
	g := os.NewFile(uintptr(n), f.Name())
	t.Cleanup(func() { g.Close() })
	return g
}

// The held helper starts whatever descriptor numbers a start's own files
// land on. CI's crash storm lost an acknowledged job to "fork/exec
// /proc/self/fd/86: permission denied": the start's status pipe had
// landed on 85, the child's descriptor shuffle moved its error pipe to 86
// (one above the highest it passes) over the held helper, and execve met
// a pipe. Here the held program (a shell) sits at N and a start's file at
// N-1, the layout of that run.
func TestHeldHelper_StartsWhateverNumbersTheStartsFilesHave(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip(err)
	}
	for _, from := range []int{64, 87, 513} {
		t.Run(fmt.Sprint(from), func(t *testing.T) {
			h, err := holdHelper(sh)
			if err != nil {
				t.Fatal(err)
			}
			n := freeFD(t, from)
			h.held = moveFD(t, h.held, n)
			h.argv = []string{sh, "-c", "exit 7"}
			devnull, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			below := moveFD(t, devnull, n-1)
			cmd := h.command(below)
			err = cmd.Run()
			if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 7 {
				t.Fatalf("the held helper at descriptor %d, a start's file at %d: %v; want the held program's exit 7", n, n-1, err)
			}
		})
	}
}
