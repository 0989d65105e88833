package scheduler

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/queued/store"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// setupHolders starts a scheduler whose driver path is a fake KMD tree
// with empty pids files for cards 0 and 1, scanning afresh for every
// status.
func setupHolders(t *testing.T, tweak func(*Options)) (*bundle, *kmdtest.Tree) {
	t.Helper()
	tree := kmdtest.NewTree(t, filepath.Join(t.TempDir(), "tenstorrent"))
	tree.SetPids(0)
	tree.SetPids(1)
	ctl := newControls(t)
	b := setup(t, func(o *Options) {
		o.DriverPath = tree.Dir
		o.HolderMaxAge = time.Nanosecond
		o.ForeignRecheck = 10 * time.Millisecond
		o.Controls = ctl.options()
		if tweak != nil {
			tweak(o)
		}
	})
	return b, tree
}

// listSelf is a job that writes its own pid into a card's pids file, as
// opening the device would, waits for the gate, and takes itself out
// again before it ends.
func listSelf(tree *kmdtest.Tree, card int, gate string) string {
	p := tree.PidsPath(card)
	return fmt.Sprintf("echo $$ > %[1]q.tmp && mv %[1]q.tmp %[1]q && echo listed; %[2]s; : > %[1]q", p, gate)
}

func TestHolders_ForeignProcessesInStatus(t *testing.T) {
	t.Parallel()
	b, tree := setupHolders(t, nil)
	dir := t.TempDir()
	outsider := kmdtest.Start(t, dir, nil, "sleep", "600")
	tree.SetPids(0, outsider.PID())

	// A job on card 1 lists itself on card 1 (its own: not foreign) and
	// on card 0 (a card it was not queued for: foreign there).
	gate, release := b.gate()
	j := b.submit(1, listSelf(tree, 1, gate))
	b.waitOutput(j.ID, "listed")
	pid := b.card(1).Current.PGID
	tree.SetPids(0, outsider.PID(), pid)

	st := b.s.Status()
	c0, c1 := st.Cards[0], st.Cards[1]
	if len(c1.Foreign) != 0 || c1.ForeignError != "" {
		t.Fatalf("card 1 reports its own job as foreign: %+v %q", c1.Foreign, c1.ForeignError)
	}
	want := Holder{PID: outsider.PID(), FriendlyName: "sleep", CommandLine: "sleep 600"}
	// Holders are listed by PID; the job's may be the lower, its exec
	// helper started ahead of it (runner's spare helpers).
	foreign := slices.Clone(c0.Foreign)
	if len(foreign) == 2 && foreign[0].PID == pid {
		foreign[0], foreign[1] = foreign[1], foreign[0]
	}
	if len(foreign) != 2 || foreign[0] != want || foreign[1].PID != pid || foreign[1].JobID != j.ID {
		t.Fatalf("card 0 foreign = %+v; want %+v and pid %d carrying job %s", c0.Foreign, want, pid, j.ID)
	}
	if c0.ForeignWait || c0.Paused != "" {
		t.Fatalf("card 0 paused without TT_DEVICE_WAIT_FOREIGN: %+v", c0)
	}
	release()
	b.waitDone(j.ID)

	// An unreadable pids file is reported, not fatal.
	tree.Break(1)
	if c := b.card(1); !strings.Contains(c.ForeignError, "reading pids of device 1") {
		t.Fatalf("card 1 foreign error = %q", c.ForeignError)
	}
}

func TestHolders_WaitForeignPausesDispatchUntilTheyGo(t *testing.T) {
	t.Parallel()
	b, tree := setupHolders(t, func(o *Options) { o.WaitForeign = true })
	outsider := kmdtest.Start(t, t.TempDir(), nil, "sleep", "600")
	tree.SetPids(0, outsider.PID())

	j := b.submit(0, "echo ran")
	wantWorker := fmt.Sprintf("paused: foreign holder pid %d (sleep)", outsider.PID())
	poll(t, "card 0 to pause", func() bool { return b.card(0).Worker == wantWorker })
	if c := b.card(0); !c.ForeignWait || c.Paused != strings.TrimPrefix(wantWorker, "paused: ") {
		t.Fatalf("card 0 = %+v", c)
	}
	// Card 1 is not held and runs; a reset of the held card does not wait.
	if info := b.waitDone(b.submit(1, "true").ID); *info.ExitCode != 0 {
		t.Fatalf("card 1 job = %+v", info.Job)
	}
	r := b.waitDone(b.reset(ResetRequest{Card: cardPtr(0), NoInterrupt: true})[0].JobID)
	if r.Outcome != store.OutcomeSuccess {
		t.Fatalf("reset = %+v", r.Job)
	}
	if w, _ := b.s.Watch(j.ID); w.Info.State != store.StateQueued {
		t.Fatalf("job started while a foreign process held the card: %s", w.Info.State)
	}

	outsider.Stop()
	tree.SetPids(0)
	if info := b.waitDone(j.ID); *info.ExitCode != 0 {
		t.Fatalf("job = %+v", info.Job)
	}
	if c := b.card(0); c.Paused != "" || c.Worker != "idle" {
		t.Fatalf("card 0 after the holder left = %+v", c)
	}

	// A job's own process on its card does not pause the job behind it
	// while it runs; it leaves the pids file as it ends.
	gate, release := b.gate()
	first := b.submit(0, listSelf(tree, 0, gate))
	b.waitOutput(first.ID, "listed")
	second := b.submit(0, "true")
	if c := b.card(0); len(c.Foreign) != 0 || c.Worker != "running" {
		t.Fatalf("card 0 with its own job listed = %+v", c)
	}
	release()
	b.waitDone(first.ID)
	b.waitDone(second.ID)
}

// TestHolders_ContainerView reads the shared container's-view tree
// (testdata/kmd/container-view), which otelcol-tt's tests read too: holders
// outside queued's PID namespace are foreign on both cards, and unnamed.
func TestHolders_ContainerView(t *testing.T) {
	t.Parallel()
	driver := kmdtest.CopyTree(t, "container-view")
	b := setup(t, func(o *Options) { o.DriverPath = driver })
	st := b.s.Status()
	for _, c := range st.Cards {
		if len(c.Foreign) != 1 || c.Foreign[0].PID != 0 || c.Foreign[0].FriendlyName != "(outside this PID namespace)" {
			t.Fatalf("card %d foreign = %+v; want one holder outside the namespace", c.ID, c.Foreign)
		}
	}
}

// tt_device_queue.card.foreign counts, per card, the processes of no
// queued job holding it (a job of another card is counted as cross-card
// instead): an alert can then say which card a process outside the queue
// holds while the card's queue waits.
func TestMetrics_ForeignHoldersPerCard(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	b, tree := setupHolders(t, func(o *Options) { o.MeterProvider = mp })
	outsider := kmdtest.Start(t, t.TempDir(), nil, "sleep", "600")
	tree.SetPids(0, outsider.PID())
	gate, release := b.gate()
	defer release()
	j := b.submit(1, listSelf(tree, 1, gate)) // its own card: not foreign
	b.waitOutput(j.ID, "listed")
	// The job also holds card 0: a queued job, not one outside the queue.
	tree.SetPids(0, outsider.PID(), b.card(1).Current.PGID)
	r := collect(t, reader)
	if f0, f1 := r.gauge(t, MetricForeign, attribute.Int("card", 0)), r.gauge(t, MetricForeign, attribute.Int("card", 1)); f0 != 1 || f1 != 0 {
		t.Errorf("holders of no queued job: card 0 %v, card 1 %v; want 1, 0", f0, f1)
	}
}
