package scheduler

import (
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/fusetest"
	"github.com/ttkit/ttkit/queued/runner"
)

// A repeated job's output carries the Python tool's notes: a line before
// each iteration, and one when the timeout, which covers the whole job,
// killed it; its record says the timeout covered every iteration.
func TestJob_RepeatAndTimeoutNotes(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	info, err := b.s.Submit(JobSpec{Card: 0, Cmd: "echo run; sleep 0.2", Cwd: b.work, Repeat: 50, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	done := b.waitDone(info.ID)
	out := output(t, b, info.ID)
	wants := []string{"\n[tt-device-queue] Repeat 1/50\nrun\n", "\n[tt-device-queue] Command timed out after 2s; the queue sent "}
	// The time runs out during an iteration (SIGINT ends the sleep) or,
	// on a busy machine, just as one ended (no signal was needed) or while
	// the next one's start had not reached its program (SIGKILL at once).
	if !strings.Contains(out, "the queue sent SIGINT.\n") && !strings.Contains(out, "the queue sent no signal.\n") &&
		!strings.Contains(out, "the queue sent SIGKILL.\n") {
		t.Errorf("the timeout note names no signal sent:\n%s", out)
	}
	if done.Iterations >= 2 {
		wants = append(wants, "\n[tt-device-queue] Repeat 2/50\nrun\n")
	}
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if done.Iterations >= 50 || *done.ExitCode != -9 || !strings.Contains(done.Error, "every iteration together") {
		t.Errorf("%d iterations, exit %d, %q: want a timeout over the whole job", done.Iterations, *done.ExitCode, done.Error)
	}
}

// A job's oom_score_adj is the configured one (the Python tool's 500), so
// the kernel's OOM killer takes a job before queued; resets keep queued's.
func TestJob_OOMScoreAdj(t *testing.T) {
	t.Parallel()
	adj := 500
	b := setup(t, func(o *Options) {
		o.JobOOMScoreAdj = &adj
		o.Controls = Controls{Reset: "echo reset-oom=$(cat /proc/self/oom_score_adj) #", HealthCheck: "true"}
	})
	info := b.submit(0, "cat /proc/self/oom_score_adj")
	b.waitDone(info.ID)
	if got := strings.TrimSpace(output(t, b, info.ID)); got != "500" {
		t.Errorf("the job's oom_score_adj is %q, want 500", got)
	}
}

// Reset and health commands get a minimal environment: PATH, HOME, USER,
// LANG and the TT_ variables, nothing else of queued's (a secret in the
// unit's environment would be in a reset log every user may read).
func TestReset_MinimalEnvironment(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) {
		o.BaseEnv = []string{"PATH=/usr/bin:/bin", "HOME=/root", "USER=root", "LANG=C.UTF-8", "TT_METAL_HOME=/opt/tt-metal",
			"ROOT_SECRET=hunter2", "LD_PRELOAD=/tmp/evil.so", "http_proxy=http://user:pw@proxy"}
		o.Controls = Controls{Reset: "env; echo reset-done #", HealthCheck: "env | sed 's/^/health:/'"}
	})
	outs, err := b.s.Reset(ResetRequest{Card: new(int)})
	if err != nil {
		t.Fatal(err)
	}
	b.waitDone(outs[0].JobID)
	out := output(t, b, outs[0].JobID)
	for _, want := range []string{"PATH=/usr/bin:/bin", "HOME=/root", "USER=root", "LANG=C.UTF-8", "TT_METAL_HOME=/opt/tt-metal",
		"TT_QUEUE_DEVICE=0", "health:PATH=/usr/bin:/bin"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("reset output lacks %q", want)
		}
	}
	for _, secret := range []string{"hunter2", "LD_PRELOAD", "user:pw"} {
		if strings.Contains(out, secret) {
			t.Errorf("a reset command saw %q of queued's environment:\n%s", secret, out)
		}
	}
}

// A job whose process SIGKILL cannot end (asleep in the kernel on a FUSE
// server that reads requests and never answers) does not hold its card:
// the card's next job runs within the timeout, the kill ladder and the abandon bound (plus
// slack), and the record says the process was abandoned and why.
func TestJob_UnkillableProcessDoesNotHoldTheCard(t *testing.T) {
	t.Parallel()
	dir, abort := fusetest.UnansweredDir(t)
	b := setup(t, nil)
	began := time.Now()
	stuck, err := b.s.Submit(JobSpec{Card: 0, Cmd: "exec stat " + dir, Cwd: b.work, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	next := b.submit(0, "echo next")
	done := b.waitDone(stuck.ID)
	b.waitDone(next.ID)
	if took, limit := time.Since(began), time.Second+b.opt.KillGrace+b.opt.TermGrace+runner.DefaultAbandonAfter+5*time.Second; took > limit {
		t.Errorf("the next job ended %s after the stuck one was queued, over %s", took, limit)
	}
	if !strings.Contains(done.Error, "did not die") || !strings.Contains(done.Error, "state D") {
		t.Errorf("record error %q does not say its process was abandoned", done.Error)
	}
	abort()
	poll(t, "the abandoned process to be reaped", func() bool { return len(runner.AbandonedProcs()) == 0 })
}
