package runner

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ttkit/ttkit/internal/proctest"
)

// openFDs is the descriptors pid holds open.
func openFDs(t *testing.T, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	var fds []int
	for _, e := range ents {
		n, _ := strconv.Atoi(e.Name())
		fds = append(fds, n)
	}
	slices.Sort(fds)
	return fds
}

// With the C build of queued-exec, spares are forks of its spawner
// (spawner.go, start.c), not processes started for them: each is
// still this process's child (its parent is not the spawner), leader of
// a session of its own, with its request, status and output where a
// started spare has them and nothing else (not the spawner's socket),
// and runs its job. A spawner that dies is replaced by the next spare.
// The Go build has no spawner and says so at once, so its spares are
// started as before without waiting for one.
func TestSpawner_SparesAreForksThatStayOurChildren(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		start := time.Now()
		if sp := spawnerFor("go-helper-test", defaultHelper()); sp != nil {
			t.Fatal("the Go helper answered as a spawner")
		}
		if took := time.Since(start); took > spawnerTimeout/2 {
			t.Fatalf("the Go helper took %v to refuse being a spawner; queued waited for it", took)
		}
		return
	}
	b := setup(t, 1<<20)
	before := warmSpare(t, b)
	spawnerPIDs := proctest.ChildrenNamed(os.Getpid(), spawnerName)
	if len(spawnerPIDs) != 1 {
		t.Fatalf("spawners among our children: %v, want one", spawnerPIDs)
	}
	spares.Lock()
	list := slices.Clone(spares.byHelper[""])
	spares.Unlock()
	if len(list) == 0 {
		t.Fatal("no spare waits")
	}
	for _, sp := range list {
		pid := sp.proc.PID
		if !before[pid] {
			t.Fatalf("spare %d is not our child (children: %v)", pid, before)
		}
		if sid, err := unix.Getsid(pid); err != nil || sid != pid {
			t.Fatalf("spare %d is in session %d (%v), want its own", pid, sid, err)
		}
		for deadline := time.Now().Add(30 * time.Second); !slices.Equal(openFDs(t, pid), []int{0, 1, 2, 3, 4}); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("spare %d holds descriptors %v, want 0 to 4", pid, openFDs(t, pid))
			}
		}
		if cwd, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd"); cwd != "/" {
			t.Fatalf("spare %d works in %q, want /", pid, cwd)
		}
		if env, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ"); len(env) != 0 {
			t.Fatalf("spare %d has an environment: %q", pid, env)
		}
	}
	spec, pids := startedBy(b.spec("echo forked"))
	if res := Run(spec, b.log, nil); res.ExitCode != 0 {
		t.Fatalf("%+v", res)
	}
	wantSpare(t, before, pids)
	if out := b.output(t); !strings.Contains(out, "forked\n") {
		t.Fatalf("output %q", out)
	}

	// The spawner dies: the next spare is made by a new one.
	if err := syscall.Kill(spawnerPIDs[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for sp := takeSpare(""); sp != nil; sp = takeSpare("") {
		sp.discard()
	}
	before = warmSpare(t, b)
	spec, pids = startedBy(b.spec("echo again"))
	if res := Run(spec, b.log, nil); res.ExitCode != 0 {
		t.Fatalf("%+v", res)
	}
	wantSpare(t, before, pids)
	second := proctest.ChildrenNamed(os.Getpid(), spawnerName)
	if len(second) != 1 || second[0] == spawnerPIDs[0] {
		t.Fatalf("spawners after the first was killed: %v (the first was %d); want a new one", second, spawnerPIDs[0])
	}

	// A spawner that never answers (stopped, as a job of queued's own
	// user could do) is given up after spawnerTimeout and killed; the
	// spare is started instead, and the next one comes from a new
	// spawner.
	old := spawnerTimeout
	spawnerTimeout = 300 * time.Millisecond
	defer func() {
		for refilling.Load() { // a refill reads the timeout
			time.Sleep(5 * time.Millisecond)
		}
		spawnerTimeout = old
	}()
	dropSpawner("", spawnerOf(t, ""))
	warmSpare(t, b) // a new spawner, with the short timeout
	stopped := proctest.ChildrenNamed(os.Getpid(), spawnerName)
	if len(stopped) != 1 {
		t.Fatalf("spawners: %v, want one", stopped)
	}
	if err := syscall.Kill(stopped[0], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for sp := takeSpare(""); sp != nil; sp = takeSpare("") {
		sp.discard()
	}
	start := time.Now()
	sp, err := startSpare("", defaultHelper())
	if err != nil {
		t.Fatalf("a spare with the spawner stopped: %v", err)
	}
	defer sp.discard()
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the spare took %v with the spawner stopped", took)
	}
	if slices.Contains(proctest.ChildrenNamed(os.Getpid(), spawnerName), stopped[0]) {
		t.Fatalf("the stopped spawner %d is still our child once a spare was made without it", stopped[0])
	}
	before = warmSpare(t, b)
	spec, pids = startedBy(b.spec("echo after-a-stopped-spawner"))
	if res := Run(spec, b.log, nil); res.ExitCode != 0 {
		t.Fatalf("%+v", res)
	}
	wantSpare(t, before, pids)
	if now := proctest.ChildrenNamed(os.Getpid(), spawnerName); len(now) != 1 || now[0] == stopped[0] {
		t.Fatalf("spawners after one was stopped: %v; want a new one", now)
	}
}

// spawnerOf is the spawner of key, which must be running.
func spawnerOf(t *testing.T, key string) *spawner {
	t.Helper()
	spawners.Lock()
	defer spawners.Unlock()
	sp := spawners.byHelper[key]
	if sp == nil {
		t.Fatalf("no spawner for %q", key)
	}
	return sp
}

// TestSpawner_WaitsForItsAnswerInThePoller: a wait for the spawner's
// answer parks in Go's poller, not in a read that holds a thread (issue
// 41), and the spare comes once the spawner answers.
func TestSpawner_WaitsForItsAnswerInThePoller(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("the Go build of queued-exec has no spawner")
	}
	sp := spawnerFor("poller-test", defaultHelper())
	if sp == nil {
		t.Fatal("no spawner")
	}
	defer dropSpawner("poller-test", sp)
	p, err := newHelperPipes()
	if err != nil {
		t.Fatal(err)
	}
	defer p.closeOurs()
	defer p.closeTheirs()
	if err := syscall.Kill(sp.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	type spawned struct {
		pid int
		err error
	}
	done := make(chan spawned, 1)
	go func() {
		cmd, err := sp.spawn(p.rr, p.sw, p.pw)
		if err != nil {
			done <- spawned{err: err}
			return
		}
		done <- spawned{pid: cmd.Process.Pid}
		cmd.Process.Kill()
		cmd.Wait()
	}()
	waitFor(t, "the wait for the spawner's answer to park in the poller", func() bool {
		return parkedIn("(*spawner).spawn(", "IO wait") == 1
	})
	if err := syscall.Kill(sp.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got.err != nil || got.pid <= 0 {
		t.Fatalf("spawn once the spawner went on: %+v", got)
	}
}
