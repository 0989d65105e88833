package scheduler

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/fusetest"
	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
)

// A job's end commits while its leftovers are still being swept
// (runner.Spec.SettleLater). A crash in between leaves a process of a job
// recorded done: a restart kills what the last job to end on each card
// in this boot left, and spares the markers of older jobs and of other
// boots.
func TestRestart_KillsWhatTheLastJobOfACardLeft(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.s.Stop()
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Skip("no boot id:", err)
	}
	zero := 0
	now := time.Now()
	done := func(seq uint64, bootID string, ended time.Time) store.Job {
		code := 0
		return store.Job{ID: store.NewID(), Seq: seq, Kind: store.KindJob, Device: &zero, Cmd: "true", Cwd: b.work, Repeat: 1,
			State: store.StateDone, SubmittedAt: ended, StartedAt: ended, FinishedAt: ended, ExitCode: &code,
			Outcome: "success", BootID: bootID}
	}
	older := done(10, strings.TrimSpace(string(boot)), now.Add(-time.Minute))
	last := done(11, strings.TrimSpace(string(boot)), now)
	otherBoot := done(12, "another-boot", now.Add(-2*time.Hour))
	start := func(id string) *exec.Cmd {
		cmd := exec.Command("sleep", "1000")
		cmd.Env = append(os.Environ(), runner.JobEnvVar+"="+id)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	leftOfLast, leftOfOlder, leftOfOtherBoot := start(last.ID), start(older.ID), start(otherBoot.ID)
	if err := b.st.Put(older, last, otherBoot); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() { leftOfLast.Wait(); close(ended) }()

	b.start()
	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the leftover of the card's last job is alive 20 s after the restart")
	}
	for name, cmd := range map[string]*exec.Cmd{"an older job's": leftOfOlder, "another boot's": leftOfOtherBoot} {
		if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("%s marker was killed: %v", name, err)
		}
	}
}

// The card's next job starts only once what the last one left is dead,
// although the last one's end commits while it is swept: a job that left
// processes in sessions of their own (found by its marker: enough that
// the sweep takes longer than the commit) and one in its group, none
// holding its output (so the end is known at once), then the next job
// looks for them. A zombie counts as gone (the sweep's rule), and so does
// one reaped while it looks.
func TestQueue_NextJobStartsOnceTheLastOnesLeftoversAreGone(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	pids := b.work + "/pids"
	gate, release := b.gate()
	gated := b.submit(0, gate)
	left := b.submit(0, "for i in $(seq 64); do setsid sleep 1000 >/dev/null 2>&1 & echo $! >> "+pids+"; done; sleep 1000 >/dev/null 2>&1 & echo $! >> "+pids+"; echo started")
	look := b.submit(0, `for p in $(cat `+pids+`); do if st=$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null) && [ "$st" != Z ]; then echo "alive $p"; fi; done; echo looked`)
	release()
	b.waitDone(gated.ID)
	if info := b.waitDone(left.ID); *info.ExitCode != 0 {
		t.Fatalf("%+v", info.Job)
	}
	b.waitDone(look.ID)
	if out := output(t, b, look.ID); out != "looked\n" {
		t.Fatalf("the next job saw the last one's leftovers: %q", out)
	}
}

// A leftover that SIGKILL cannot end at once (asleep in the kernel on a
// FUSE mount that never answers) holds the card's next job until the
// sweep gives up on it, as it did when the sweep came before the job's
// end was committed; and the job is shown done only then.
func TestQueue_NextJobWaitsForTheSweepOfAnUnkillableLeftover(t *testing.T) {
	t.Parallel()
	dir, abort := fusetest.UnansweredDir(t)
	defer abort()
	b := setup(t, nil)
	endA, startB := b.work+"/end-a", b.work+"/start-b"
	gate, release := b.gate()
	gated := b.submit(0, gate)
	a := b.submit(0, "setsid stat "+dir+" >/dev/null 2>&1 & sleep 0.2; date +%s.%N > "+endA)
	nextJob := b.submit(0, "date +%s.%N > "+startB)
	release()
	b.waitDone(gated.ID)
	b.waitDone(a.ID)
	seenDone := float64(time.Now().UnixNano()) / 1e9
	b.waitDone(nextJob.ID)
	read := func(p string) float64 {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if gap := seenDone - read(endA); gap < 1.5 {
		t.Errorf("the job was shown done %.3f s after its end, while its unkillable leftover was still being swept (want about 2 s)", gap)
	}
	if gap := read(startB) - read(endA); gap < 1.5 {
		t.Fatalf("the next job started %.3f s after the last one ended, while its unkillable leftover was still being swept (want about 2 s)", gap)
	}
}
