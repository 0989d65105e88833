// Package proctest builds the odd processes tests of /proc readers need
// and no shell command makes.
package proctest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// zombieLeaderSource is a C program whose main thread exits
// (pthread_exit) while the thread it started waits on for ever.
const zombieLeaderSource = `#include <pthread.h>
#include <unistd.h>
static void *run(void *a) { for (;;) pause(); return a; }
int main(void) { pthread_t t; pthread_create(&t, 0, run, 0); pthread_exit(0); }
`

// ZombieLeader builds, in a temporary directory of t, a program whose
// main thread exits while another of its threads runs on, and returns
// its path. Running, such a process reads Z in /proc/<pid>/stat, its own
// cmdline reads empty and its environ fails with ESRCH, yet it lives and
// keeps what it opened (a card): the case a reader of /proc that trusts
// the leader's files gets wrong. It needs cc, which the race detector
// needs too.
func ZombieLeader(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "zl.c"), filepath.Join(dir, "zl")
	if err := os.WriteFile(src, []byte(zombieLeaderSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cc", "-o", bin, src, "-lpthread").CombinedOutput(); err != nil {
		t.Fatalf("building the test program with cc: %v\n%s", err, out)
	}
	return bin
}

// WaitMainThreadExited waits, polling up to 10 s, until the stat of pid
// (a ZombieLeader started by the test) reads Z: its main thread exited.
func WaitMainThreadExited(t testing.TB, pid int) {
	t.Helper()
	path := fmt.Sprintf("/proc/%d/stat", pid)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		b, err := os.ReadFile(path)
		if _, rest, _ := strings.Cut(string(b), ") "); err == nil && strings.HasPrefix(rest, "Z") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never read Z (its main thread exited): %q, %v", path, b, err)
		}
	}
}

// Children is the set of parent's children: the processes whose
// /proc/<pid>/stat names parent in its fourth field. It takes no test,
// so a cleanup may call it: a /proc it cannot list has no children.
func Children(parent int) map[int]bool {
	ents, _ := os.ReadDir("/proc")
	want := strconv.Itoa(parent)
	kids := map[int]bool{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // it ended
		}
		// The name, in parentheses, may hold spaces: fields follow it.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 {
			if f := strings.Fields(string(b[i+1:])); len(f) > 1 && f[1] == want {
				kids[pid] = true
			}
		}
	}
	return kids
}

// ChildrenNamed is parent's children whose comm is name, in no order.
func ChildrenNamed(parent int, name string) []int {
	var pids []int
	for pid := range Children(parent) {
		if comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm")); err == nil && strings.TrimSpace(string(comm)) == name {
			pids = append(pids, pid)
		}
	}
	return pids
}
