package scheduler

import (
	"context"
	"testing"
	"time"

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
