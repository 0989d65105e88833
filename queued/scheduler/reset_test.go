package scheduler

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/store"
)

// controls are fake reset, health check and deep reset scripts. Each one
// appends "<name> <args>" to the calls file, prints a line to its log,
// blocks while a block-<name> file exists until an open-<name> file
// appears, and fails while a fail-<name> file exists.
type controls struct {
	t   *testing.T
	dir string
}

func newControls(t *testing.T) *controls {
	t.Helper()
	c := &controls{t: t, dir: t.TempDir()}
	for _, name := range []string{"reset", "health", "deep"} {
		script := fmt.Sprintf(`#!/bin/sh
echo "%[1]s $*" >> %[2]q/calls
echo "%[1]s output for card $TT_QUEUE_DEVICE"
if [ -e %[2]q/block-%[1]s ]; then
  echo "%[1]s waiting"
  while [ ! -e %[2]q/open-%[1]s ]; do sleep 0.01; done
fi
if [ -e %[2]q/fail-%[1]s ]; then echo "%[1]s failed"; exit 1; fi
exit 0
`, name, c.dir)
		if err := os.WriteFile(filepath.Join(c.dir, name+".sh"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// script is the path of one fake command.
func (c *controls) script(name string) string { return filepath.Join(c.dir, name+".sh") }

// options are Controls running the fake scripts: reset and health check
// with {device}, the deep reset without it.
func (c *controls) options() Controls {
	return Controls{
		Reset:       c.script("reset") + " {device} --no_reinit",
		HealthCheck: c.script("health") + " {device}",
		Dir:         c.dir,
	}
}

// flag creates or removes one of the control files.
func (c *controls) flag(name string, on bool) {
	c.t.Helper()
	path := filepath.Join(c.dir, name)
	if !on {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			c.t.Fatal(err)
		}
		return
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		c.t.Fatal(err)
	}
}

// calls returns the recorded invocations, one per line.
func (c *controls) calls() []string {
	data, err := os.ReadFile(filepath.Join(c.dir, "calls"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

func (c *controls) wantCalls(want ...string) {
	c.t.Helper()
	if got := c.calls(); strings.Join(got, "|") != strings.Join(want, "|") {
		c.t.Fatalf("control calls = %q, want %q", got, want)
	}
}

// setupReset starts a scheduler on cards 0 and 1 with the fake controls and
// a boot id file of its own.
func setupReset(t *testing.T, tweak func(*Options)) (*bundle, *controls) {
	t.Helper()
	ctl := newControls(t)
	bootID := filepath.Join(t.TempDir(), "boot_id")
	if err := os.WriteFile(bootID, []byte("boot-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := setup(t, func(o *Options) {
		o.Controls = ctl.options()
		o.BootIDPath = bootID
		if tweak != nil {
			tweak(o)
		}
	})
	return b, ctl
}

func (b *bundle) reset(req ResetRequest) []ResetOutcome {
	b.t.Helper()
	out, err := b.s.Reset(req)
	if err != nil {
		b.t.Fatal(err)
	}
	return out
}

func cardPtr(n int) *int { return &n }

func (b *bundle) card(id int) CardStatus {
	b.t.Helper()
	for _, c := range b.s.Status().Cards {
		if c.ID == id {
			return c
		}
	}
	b.t.Fatalf("no card %d in status", id)
	return CardStatus{}
}

func TestReset_PreemptsRunningJobOnItsCardOnly(t *testing.T) {
	t.Parallel()
	b, ctl := setupReset(t, nil)
	gate0, _ := b.gate()
	gate1, release1 := b.gate()
	victim := b.submit(0, gate0)
	other := b.submit(1, gate1)
	b.waitOutput(victim.ID, "started")
	b.waitOutput(other.ID, "started")
	behind := b.submit(0, "echo behind")

	out := b.reset(ResetRequest{Card: cardPtr(0)})
	if len(out) != 1 || out[0].Card != 0 || out[0].Coalesced || out[0].Skipped || out[0].Interrupted != victim.ID {
		t.Fatalf("outcome = %+v", out)
	}
	r := b.waitDone(out[0].JobID)
	if r.Kind != store.KindReset || r.Outcome != store.OutcomeSuccess || *r.ExitCode != 0 {
		t.Fatalf("reset record = %+v", r.Job)
	}
	v := b.waitDone(victim.ID)
	if *v.ExitCode != -1 || v.Outcome != store.OutcomeInterrupted || v.Error != "interrupted by a reset of card 0" {
		t.Fatalf("interrupted job = %+v", v.Job)
	}
	bh := b.waitDone(behind.ID)
	if *bh.ExitCode != 0 || bh.StartedAt.Before(r.FinishedAt) || r.StartedAt.Before(v.FinishedAt) {
		t.Fatalf("order: victim ended %v, reset ran %v..%v, queued job started %v", v.FinishedAt, r.StartedAt, r.FinishedAt, bh.StartedAt)
	}
	ctl.wantCalls("reset 0 --no_reinit", "health 0")
	log := output(t, b, r.ID)
	for _, want := range []string{
		"== reset: " + ctl.script("reset") + " 0 --no_reinit\n", "reset output for card 0\n", "== reset: exit 0 after",
		"== health check: " + ctl.script("health") + " 0\n", "health output for card 0\n", "== card 0 recovered by the reset (rung 1/1): health check and gate passed\n",
	} {
		if !strings.Contains(log, want) {
			t.Fatalf("reset log lacks %q:\n%s", want, log)
		}
	}
	if w, _ := b.s.Watch(other.ID); w.Info.State != store.StateRunning {
		t.Fatalf("card 1's job was disturbed: %s", w.Info.State)
	}
	c0 := b.card(0)
	if c0.State != Healthy || c0.Reset != nil || c0.LastReset == nil || c0.LastReset.JobID != r.ID || c0.LastReset.Result != ResultOK {
		t.Fatalf("card 0 status = %+v", c0)
	}
	if c1 := b.card(1); c1.LastReset != nil {
		t.Fatalf("card 1 was reset: %+v", c1.LastReset)
	}
	release1()
	b.waitDone(other.ID)
}

func TestReset_NoInterruptWaitsForRunningJob(t *testing.T) {
	t.Parallel()
	b, ctl := setupReset(t, nil)
	gate, release := b.gate()
	j := b.submit(0, gate)
	b.waitOutput(j.ID, "started")
	out := b.reset(ResetRequest{Card: cardPtr(0), NoInterrupt: true})
	if out[0].Interrupted != "" || out[0].State != store.StateQueued {
		t.Fatalf("outcome = %+v", out[0])
	}
	if c := b.card(0); c.Reset == nil || c.Reset.JobID != out[0].JobID || c.Reset.State != store.StateQueued {
		t.Fatalf("pending reset in status = %+v", c.Reset)
	}
	release()
	if info := b.waitDone(j.ID); *info.ExitCode != 0 {
		t.Fatalf("job = %+v", info.Job)
	}
	b.waitDone(out[0].JobID)
	ctl.wantCalls("reset 0 --no_reinit", "health 0")
}

func TestReset_ConcurrentRequestsCoalesce(t *testing.T) {
	t.Parallel()
	b, ctl := setupReset(t, nil)
	ctl.flag("block-reset", true)
	const n = 8
	outs := make([][]ResetOutcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := b.s.Reset(ResetRequest{Card: cardPtr(0)})
			if err != nil {
				t.Error(err)
			}
			outs[i] = out
		}()
	}
	wg.Wait()
	id, coalesced := outs[0][0].JobID, 0
	for _, out := range outs {
		if len(out) != 1 || out[0].JobID != id {
			t.Fatalf("requests named different resets: %+v", outs)
		}
		if out[0].Coalesced {
			coalesced++
		}
	}
	if coalesced != n-1 {
		t.Fatalf("%d of %d requests coalesced, want %d", coalesced, n, n-1)
	}
	b.waitOutput(id, "reset waiting")
	if c := b.card(0); c.State != Resetting || c.Reset == nil || c.Reset.State != store.StateRunning || c.Worker != "running" {
		t.Fatalf("card 0 while resetting = %+v", c)
	}
	// A request while the reset runs joins it too.
	if out := b.reset(ResetRequest{Card: cardPtr(0)}); out[0].JobID != id || !out[0].Coalesced || out[0].State != store.StateRunning {
		t.Fatalf("request during the reset = %+v", out[0])
	}
	ctl.flag("open-reset", true)
	b.waitDone(id)
	ctl.wantCalls("reset 0 --no_reinit", "health 0")
}

func TestReset_JobBasedSkipsWhenCardWasResetSince(t *testing.T) {
	t.Parallel()
	b, ctl := setupReset(t, nil)
	a := b.submit(0, "true")
	b.waitDone(a.ID)
	out := b.reset(ResetRequest{JobID: a.ID})
	if len(out) != 1 || out[0].Card != 0 || out[0].Skipped || out[0].JobID == "" {
		t.Fatalf("first job-based reset = %+v", out)
	}
	r := b.waitDone(out[0].JobID)

	again := b.reset(ResetRequest{JobID: a.ID})
	if !again[0].Skipped || again[0].JobID != "" ||
		again[0].Reason != fmt.Sprintf("card 0 was reset since job %s ran (reset %s at %s, result ok)", a.ID, r.ID, r.FinishedAt.UTC().Format(time.RFC3339)) {
		t.Fatalf("second job-based reset = %+v", again[0])
	}
	ctl.wantCalls("reset 0 --no_reinit", "health 0")

	// A job that started after the reset still gets one, and a running
	// job named by a reset is the one it interrupts.
	gate, _ := b.gate()
	later := b.submit(0, gate)
	b.waitOutput(later.ID, "started")
	out = b.reset(ResetRequest{JobID: later.ID})
	if out[0].Skipped || out[0].Interrupted != later.ID {
		t.Fatalf("reset for the running job = %+v", out[0])
	}
	b.waitDone(out[0].JobID)
	if info := b.waitDone(later.ID); info.Outcome != store.OutcomeInterrupted || info.ResetEpoch != 1 {
		t.Fatalf("job = %+v", info.Job)
	}

	// A job that never ran has nothing to recover from.
	gate, release := b.gate()
	running := b.submit(0, gate)
	queued := b.submit(0, "true")
	if out := b.reset(ResetRequest{JobID: queued.ID}); !out[0].Skipped || !strings.Contains(out[0].Reason, "has not run") {
		t.Fatalf("reset for a queued job = %+v", out[0])
	}
	release()
	b.waitDone(running.ID)
	b.waitDone(queued.ID)
}

func TestReset_AllCards(t *testing.T) {
	t.Parallel()
	b, ctl := setupReset(t, nil)
	out := b.reset(ResetRequest{})
	if len(out) != 2 || out[0].Card != 0 || out[1].Card != 1 || out[0].JobID == out[1].JobID {
		t.Fatalf("outcomes = %+v", out)
	}
	for _, o := range out {
		if r := b.waitDone(o.JobID); r.Card() != o.Card || r.Outcome != store.OutcomeSuccess {
			t.Fatalf("reset = %+v", r.Job)
		}
	}
	calls := ctl.calls()
	joined := strings.Join(calls, "|")
	if len(calls) != 4 || !strings.Contains(joined, "reset 0 --no_reinit") || !strings.Contains(joined, "reset 1 --no_reinit") ||
		!strings.Contains(joined, "health 0") || !strings.Contains(joined, "health 1") {
		t.Fatalf("calls = %q", calls)
	}
}

func TestReset_CommandWithoutDeviceGetsItAppended(t *testing.T) {
	t.Parallel()
	b, ctl := setupReset(t, func(o *Options) {
		o.Controls.Reset = o.Controls.Dir + "/reset.sh --no_reinit"
		o.Controls.DeepReset = o.Controls.Dir + "/deep.sh --hard"
		o.Controls.HealthCheck = o.Controls.Dir + "/health.sh --quick" // not a reset command: nothing appended
	})
	ctl.flag("fail-reset", true)
	out := b.reset(ResetRequest{Card: cardPtr(1)})
	b.waitDone(out[0].JobID)
	ctl.wantCalls("reset --no_reinit 1", "deep --hard 1", "health --quick")
}

func TestReset_FailedRecoveryKillsOnlyThatCardDurably(t *testing.T) {
	t.Parallel()
	b, ctl := setupReset(t, func(o *Options) { o.Controls.DeepReset = o.Controls.Dir + "/deep.sh" })
	ctl.flag("fail-health", true)
	gate0, _ := b.gate()
	gate1, release1 := b.gate()
	victim := b.submit(0, gate0)
	j1 := b.submit(1, gate1)
	b.waitOutput(victim.ID, "started")
	b.waitOutput(j1.ID, "started")
	q1, q2 := b.submit(0, "echo never"), b.submit(0, "echo never")
	k := b.submit(1, "echo card 1 goes on")

	out := b.reset(ResetRequest{Card: cardPtr(0)})
	r := b.waitDone(out[0].JobID)
	ctl.wantCalls("reset 0 --no_reinit", "health 0", "deep 0", "health 0")
	if r.Outcome != store.OutcomeFailure || *r.ExitCode != 1 ||
		r.Error != "card 0 is dead: every rung failed: reset exited 0, health check exited 1; deep reset exited 0, health check exited 1" {
		t.Fatalf("reset record = %+v", r.Job)
	}
	if log := output(t, b, r.ID); !strings.Contains(log, "== deep reset: "+ctl.script("deep")+" 0\n") || !strings.Contains(log, "== card 0 is dead:") {
		t.Fatalf("reset log:\n%s", log)
	}
	for _, q := range []JobInfo{q1, q2} {
		info := b.waitDone(q.ID)
		if *info.ExitCode != -1 || info.Outcome != store.OutcomeCardDead || info.Error != "card 0 is dead" || info.Iterations != 0 {
			t.Fatalf("queued job of the dead card = %+v", info.Job)
		}
	}
	_, err := b.s.Submit(JobSpec{Card: 0, Cmd: "true", Cwd: b.work})
	var dead *DeadCardError
	if !errors.Is(err, ErrCardDead) || !errors.As(err, &dead) || dead.Card != 0 || !strings.HasPrefix(err.Error(), "card 0 is dead since ") {
		t.Fatalf("submit to the dead card: %v", err)
	}
	c0 := b.card(0)
	if c0.State != Dead || c0.Worker != "paused: card dead" || c0.DeadSince.IsZero() || !strings.Contains(c0.DeadReason, "health check exited 1") ||
		c0.LastReset == nil || c0.LastReset.Result != ResultFailed {
		t.Fatalf("card 0 status = %+v", c0)
	}

	// Card 1 keeps working.
	release1()
	b.waitDone(j1.ID)
	if info := b.waitDone(k.ID); *info.ExitCode != 0 {
		t.Fatalf("card 1 job = %+v", info.Job)
	}
	b.submit(1, "true")

	// A job-based reset does not revive it.
	if out := b.reset(ResetRequest{JobID: victim.ID}); !out[0].Skipped || !strings.Contains(out[0].Reason, "card 0 is dead") {
		t.Fatalf("job-based reset of a dead card = %+v", out[0])
	}

	// Same boot: still dead after a restart.
	b.restart()
	if _, err := b.s.Submit(JobSpec{Card: 0, Cmd: "true", Cwd: b.work}); !errors.Is(err, ErrCardDead) {
		t.Fatalf("submit after a same-boot restart: %v", err)
	}
	if c := b.card(0); c.State != Dead || c.DeadReason != c0.DeadReason || !c.DeadSince.Equal(c0.DeadSince) {
		t.Fatalf("card 0 after restart = %+v", c)
	}

	// A new boot starts it healthy.
	b.s.Stop()
	if err := os.WriteFile(b.opt.BootIDPath, []byte("boot-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.start()
	if c := b.card(0); c.State != Healthy || c.DeadReason != "" || c.LastReset == nil || c.LastReset.Result != ResultFailed {
		t.Fatalf("card 0 after a reboot = %+v", c)
	}
	if info := b.waitDone(b.submit(0, "true").ID); *info.ExitCode != 0 {
		t.Fatalf("job after reboot = %+v", info.Job)
	}
	cards, err := b.st.Cards()
	if err != nil || len(cards) != 1 || cards[0].State != store.CardHealthy {
		t.Fatalf("card records after reboot = %+v, %v", cards, err)
	}
}

func TestReset_ExplicitResetRevivesDeadCard(t *testing.T) {
	t.Parallel()
	b, ctl := setupReset(t, nil)
	ctl.flag("fail-reset", true)
	r1 := b.waitDone(b.reset(ResetRequest{Card: cardPtr(0)})[0].JobID)
	if r1.Error != "card 0 is dead: reset exited 1" {
		t.Fatalf("failed reset = %+v", r1.Job)
	}
	ctl.flag("fail-reset", false)
	// Every-card resets include the dead card, like a reset by card.
	out := b.reset(ResetRequest{})
	for _, o := range out {
		b.waitDone(o.JobID)
	}
	c0 := b.card(0)
	if c0.State != Healthy || c0.DeadReason != "" || c0.LastReset.JobID != out[0].JobID || c0.LastReset.Result != ResultOK {
		t.Fatalf("card 0 after revival = %+v", c0)
	}
	if info := b.waitDone(b.submit(0, "true").ID); *info.ExitCode != 0 {
		t.Fatalf("job on the revived card = %+v", info.Job)
	}
	cards, _ := b.st.Cards()
	if cards[0].State != store.CardHealthy || cards[0].ResetEpoch != 2 {
		t.Fatalf("card 0 record = %+v", cards[0])
	}
}

func TestReset_ControlCommandTimeout(t *testing.T) {
	t.Parallel()
	b, ctl := setupReset(t, func(o *Options) { o.Controls.HealthCheckTimeout = 100 * time.Millisecond })
	ctl.flag("block-health", true)
	r := b.waitDone(b.reset(ResetRequest{Card: cardPtr(1)})[0].JobID)
	if *r.ExitCode != -9 || r.Error != "card 1 is dead: reset exited 0, health check timed out after 100ms" {
		t.Fatalf("reset = %+v", r.Job)
	}
}

func TestReset_InterruptedByStopIsRetriedAfterRestart(t *testing.T) {
	t.Parallel()
	b, ctl := setupReset(t, nil)
	ctl.flag("block-reset", true)
	out := b.reset(ResetRequest{Card: cardPtr(0)})
	id := out[0].JobID
	q := b.submit(0, "echo after the reset")
	b.waitOutput(id, "reset waiting")
	b.s.Stop()
	rec, err := b.st.Job(id)
	if err != nil || rec.State != store.StateQueued || rec.ExitCode != nil || !rec.StartedAt.IsZero() {
		t.Fatalf("reset record after stop = %+v, %v", rec, err)
	}
	ctl.flag("block-reset", false)
	b.start()
	r := b.waitDone(id)
	if r.Outcome != store.OutcomeSuccess {
		t.Fatalf("retried reset = %+v", r.Job)
	}
	ctl.wantCalls("reset 0 --no_reinit", "reset 0 --no_reinit", "health 0")
	log := output(t, b, id)
	for _, want := range []string{"reset waiting", "interrupted by a service stop", "== retrying the reset of card 0 after a service restart", "recovered"} {
		if !strings.Contains(log, want) {
			t.Fatalf("reset log lacks %q:\n%s", want, log)
		}
	}
	if info := b.waitDone(q.ID); *info.ExitCode != 0 || info.StartedAt.Before(r.FinishedAt) {
		t.Fatalf("queued job = %+v", info.Job)
	}
}

func TestReset_KillQueuedResetButNotARunningOne(t *testing.T) {
	t.Parallel()
	b, ctl := setupReset(t, nil)
	gate, release := b.gate()
	j := b.submit(0, gate)
	b.waitOutput(j.ID, "started")
	queued := b.reset(ResetRequest{Card: cardPtr(0), NoInterrupt: true})[0].JobID
	if info, err := b.s.Kill(queued); err != nil || info.Outcome != store.OutcomeKilled {
		t.Fatalf("kill queued reset = %+v, %v", info.Job, err)
	}
	if c := b.card(0); c.Reset != nil {
		t.Fatalf("killed reset still pending: %+v", c.Reset)
	}
	release()
	b.waitDone(j.ID)

	ctl.flag("block-reset", true)
	running := b.reset(ResetRequest{Card: cardPtr(0)})[0].JobID
	b.waitOutput(running, "reset waiting")
	if _, err := b.s.Kill(running); !errors.Is(err, ErrResetRunning) {
		t.Fatalf("kill running reset: %v", err)
	}
	ctl.flag("open-reset", true)
	b.waitDone(running)
}

func TestReset_RefusedWithoutControls(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	if _, err := b.s.Reset(ResetRequest{Card: cardPtr(0)}); !errors.Is(err, ErrNoControls) {
		t.Fatalf("Reset without controls: %v", err)
	}
}

func TestReset_RecoveredAfterCrashOnSameBootOnly(t *testing.T) {
	t.Parallel()
	b, ctl := setupReset(t, nil)
	b.s.Stop()
	// Records as a crash leaves them: a reset running on card 0 on this
	// boot, a reset queued for card 1 on an earlier boot.
	seq, _ := b.st.LastSeq()
	zero, one := 0, 1
	running := store.Job{ID: store.NewID(), Seq: seq + 1, Kind: store.KindReset, Device: &zero, Cmd: "reset card 0", Cwd: "/",
		Repeat: 1, State: store.StateRunning, SubmittedAt: time.Now(), StartedAt: time.Now(), BootID: "boot-1"}
	stale := store.Job{ID: store.NewID(), Seq: seq + 2, Kind: store.KindReset, Device: &one, Cmd: "reset card 1", Cwd: "/",
		Repeat: 1, State: store.StateQueued, SubmittedAt: time.Now(), BootID: "boot-0"}
	if err := b.st.Put(running, stale); err != nil {
		t.Fatal(err)
	}
	b.start()
	if r := b.waitDone(running.ID); r.Outcome != store.OutcomeSuccess {
		t.Fatalf("reset running at the crash = %+v", r.Job)
	}
	r := b.waitDone(stale.ID)
	if r.Outcome != store.OutcomeInterrupted || *r.ExitCode != -1 || !strings.Contains(r.Error, "rebooted") {
		t.Fatalf("reset from an earlier boot = %+v", r.Job)
	}
	ctl.wantCalls("reset 0 --no_reinit", "health 0")
}

func TestExpand(t *testing.T) {
	for _, tc := range []struct {
		cmd    string
		append bool
		want   string
	}{
		{"tt-smi -r /dev/tenstorrent/{device} --no_reinit", true, "tt-smi -r /dev/tenstorrent/3 --no_reinit"},
		{"my-reset --card", true, "my-reset --card 3"},
		{"my-reset --card  ", true, "my-reset --card 3"},
		{"check {device} {device}", false, "check 3 3"},
		{"check-all", false, "check-all"},
	} {
		if got := Expand(tc.cmd, 3, tc.append); got != tc.want {
			t.Errorf("Expand(%q, %v) = %q, want %q", tc.cmd, tc.append, got, tc.want)
		}
	}
}
