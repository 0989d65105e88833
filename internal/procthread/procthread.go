// Package procthread finds the threads of a process in procfs other than
// its leader, for the readers of /proc in both products.
//
// A process whose main thread exited (pthread_exit in main) while its
// other threads run on keeps its PID, its open files (a card) and its
// memory, but its leader is a zombie: /proc/<pid>/stat reads Z,
// /proc/<pid>/cmdline reads empty and /proc/<pid>/environ fails with
// ESRCH, for the kernel reads them through the leader, which gave up its
// memory map. A thread that still runs shares that memory, so
// /proc/<pid>/task/<tid>/ answers as the leader once did; and the
// process has ended only once no such thread is left. The collector
// names card holders this way (internal/procscan), queued finds and kills
// what a job left behind (queued/runner).
package procthread

import (
	"os"
	"path/filepath"
)

// batch bounds how many names of /proc/<pid>/task one read takes: the
// leader comes first and the next thread usually answers.
const batch = 8

// Other returns the procfs directory (dir/task/<tid>) of the first thread
// of the process at dir (/proc/<pid>) other than its leader for which ok
// reports true (any such thread when ok is nil), or "" when there is
// none: the process has one thread, is a zombie with none left, or is
// gone.
func Other(dir string, ok func(taskDir string) bool) string {
	f, err := os.Open(filepath.Join(dir, "task"))
	if err != nil {
		return ""
	}
	defer f.Close()
	leader := filepath.Base(dir) // the leader's TID is the PID
	for {
		names, err := f.Readdirnames(batch)
		for _, name := range names {
			if name == leader {
				continue
			}
			if td := filepath.Join(dir, "task", name); ok == nil || ok(td) {
				return td
			}
		}
		if err != nil || len(names) == 0 {
			return ""
		}
	}
}
