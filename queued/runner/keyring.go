package runner

import (
	"fmt"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// startInOwnSession starts cmd with a session keyring of its own.
//
// A child keeps its parent's session keyring across the switch to another
// user, and whoever holds a keyring as their session's may use every key
// in it: a job started as alice would hold queued's own session keyring
// (one inherited from a root login holds root's keys), and share with
// every other user's job whatever any of them put there. So the process
// is started from an OS thread of its own that first joins a new, empty
// anonymous session keyring (keyrings, like all credentials, are per
// thread, and a child is forked with its thread's); the job alone holds
// that keyring, and the thread, locked and never unlocked, ends with its
// goroutine, letting go of it.
func startInOwnSession(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if _, err := unix.KeyctlInt(unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0, 0, 0); err != nil {
			done <- fmt.Errorf("giving the job a session keyring of its own: %w", err)
			return
		}
		done <- cmd.Start()
	}()
	return <-done
}
