package procscan

import (
	"os"
	"path/filepath"
)

// A process whose main thread exited (pthread_exit in main) while its
// other threads run on keeps its PID, its open files (a card) and its
// memory, but its leader is a zombie: /proc/<pid>/cmdline reads empty
// and /proc/<pid>/environ fails with ESRCH, for the kernel reads them
// through the leader's memory map, which it gave up. A thread that
// still runs shares that memory, so /proc/<pid>/task/<tid>/ names the
// process as its leader once did.

// maxTaskNames bounds how many names of /proc/<pid>/task one look reads:
// the first task not the leader is enough, and the leader comes first.
const maxTaskNames = 8

// liveThreadDir returns the procfs directory of a thread of the process
// in dir (/proc/<pid>) other than its leader, or "" when there is none
// (the process is a zombie, or exited).
func liveThreadDir(dir string) string {
	f, err := os.Open(dir + "/task")
	if err != nil {
		return ""
	}
	defer f.Close()
	leader := filepath.Base(dir) // the leader's TID is the PID
	for {
		names, err := f.Readdirnames(maxTaskNames)
		for _, name := range names {
			if name != leader {
				return dir + "/task/" + name
			}
		}
		if err != nil || len(names) == 0 {
			return ""
		}
	}
}
