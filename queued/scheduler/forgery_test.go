package scheduler

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/usertest"
	"github.com/ttkit/ttkit/queued/api"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// An attacker starts, outside the queue and outside the victim's session,
// a process carrying the victim's running job id in TT_QUEUE_JOB_ID and
// holding card 0. With TT_DEVICE_CROSS_CARD=kill queued used to take it
// for the victim's and kill the victim ("it opened card 0 outside its
// own"). The marker proves nothing: the victim keeps running, its record
// is not marked, and the forger is a foreign holder of card 0, counted in
// tt_device_queue.card.foreign and named in status without the job.
func TestCrossCard_ForgedJobMarkerIsForeignNotTheVictims(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{CrossCardWarn, CrossCardKill} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			t.Cleanup(func() { mp.Shutdown(context.Background()) })
			b, tree := setupHolders(t, func(o *Options) {
				o.CrossCard = policy
				o.CrossCardInterval = 10 * time.Millisecond
				o.MeterProvider = mp
			})
			gate, release := b.gate()
			defer release()
			victim := b.submit(1, listSelf(tree, 1, gate))
			b.waitOutput(victim.ID, "listed")

			forger := kmdtest.Start(t, t.TempDir(), []string{runner.JobEnvVar + "=" + victim.ID}, "sleep", "600")
			forger.WaitCommandLine(t, time.Minute) // its environment is the forged one
			tree.SetPids(0, forger.PID())
			// The forger is seen as card 0's foreign holder, so the scans
			// that would have blamed the victim have run.
			poll(t, "the forger counted foreign on card 0", func() bool {
				return collect(t, reader).gauge(t, MetricForeign, attribute.Int("card", 0)) == 1
			})
			c0 := b.card(0)
			if len(c0.Foreign) != 1 || c0.Foreign[0].PID != forger.PID() || c0.Foreign[0].JobID != "" || c0.Foreign[0].ClaimedJobID != victim.ID {
				t.Errorf("card 0 foreign = %+v; want the forger, claiming job %s, proven to be no job's", c0.Foreign, victim.ID)
			}
			for i := 0; i < 20; i++ { // twenty scans' worth
				time.Sleep(10 * time.Millisecond)
				if len(b.card(0).CrossCard) != 0 {
					break
				}
			}
			if x := b.card(0).CrossCard; len(x) != 0 {
				t.Errorf("card 0 shows the victim as cross-card: %+v", x)
			}
			info, _ := b.s.Job(victim.ID)
			if info.State != store.StateRunning || len(info.CrossCards) != 0 {
				t.Fatalf("victim after the forgery: %s, cross cards %v", info.State, info.CrossCards)
			}
			release()
			if done := b.waitDone(victim.ID); done.Outcome != store.OutcomeSuccess || len(done.CrossCards) != 0 {
				t.Errorf("victim's record: %s %q %v", done.Outcome, done.Error, done.CrossCards)
			}
		})
	}
}

// The same forgery across users on a shared (system-mode) daemon: bob
// starts a process with alice's running job id in its environment and
// opens card 0 with it. Alice's job, queued on card 1 and holding only
// card 1, is neither marked nor killed; bob's process is card 0's foreign
// holder. Alice's own process on card 0 is still seen as hers (her
// session, her uid) and, under kill, ends her job: the rule stops the
// forgery, not the detection.
func TestCrossCard_AnotherUsersForgedMarkerOnASharedDaemon(t *testing.T) {
	usertest.RequireRoot(t)
	alice, bob := usertest.New(t, "ttxa"), usertest.New(t, "ttxb")
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	b, tree := setupHolders(t, func(o *Options) {
		o.Mode = api.SystemMode
		o.BaseEnv = []string{"PATH=/usr/bin:/bin"}
		o.CrossCard = CrossCardKill
		o.CrossCardInterval = 10 * time.Millisecond
		o.MeterProvider = mp
	})
	dir := usertest.OpenDir(t)
	uid := alice.UID
	victim, err := b.s.Submit(JobSpec{Card: 1, Cmd: "echo started; exec sleep 600", Cwd: dir, OwnerUID: &uid, Owner: alice.Name})
	if err != nil {
		t.Fatal(err)
	}
	b.waitOutput(victim.ID, "started")
	leader := b.card(1).Current.PGID
	tree.SetPids(1, leader)

	forger := exec.Command("sleep", "600")
	forger.Env = []string{runner.JobEnvVar + "=" + victim.ID}
	forger.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: bob.UID, Gid: bob.GID}}
	if err := forger.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { forger.Process.Kill(); forger.Wait() })
	poll(t, "the forger running sleep", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", forger.Process.Pid))
		return strings.HasPrefix(string(b), "sleep")
	})
	tree.SetPids(0, forger.Process.Pid)
	poll(t, "bob's forger counted foreign on card 0", func() bool {
		return collect(t, reader).gauge(t, MetricForeign, attribute.Int("card", 0)) == 1
	})
	time.Sleep(200 * time.Millisecond) // twenty cross-card scans
	if info, _ := b.s.Job(victim.ID); info.State != store.StateRunning || len(info.CrossCards) != 0 {
		t.Fatalf("alice's job after bob's forgery: %s, cross cards %v", info.State, info.CrossCards)
	}
	// Alice's own job process on card 0 is hers, and is acted on.
	tree.SetPids(0, forger.Process.Pid, leader)
	if done := b.waitDone(victim.ID); done.Outcome != store.OutcomeKilled || !slices.Equal(done.CrossCards, []int{0}) {
		t.Errorf("alice's job holding card 0 itself: %s %q %v", done.Outcome, done.Error, done.CrossCards)
	}
	// Cross-card kill never acted on bob's process (it ran until alice's
	// job ended); the runner's end-of-job sweep of processes carrying the
	// job's marker may then end it, which harms only bob, who set it.
}
