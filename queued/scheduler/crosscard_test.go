package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/cmdtest"
	"github.com/ttkit/ttkit/queued/store"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// listOn is a job that writes its own pid into several cards' pids files,
// as tt-umd opening every card it sees would, then waits for the gate.
func listOn(b *bundle, cards []int, gate string) string {
	var cmds []string
	for _, c := range cards {
		p := filepath.Join(b.opt.DriverPath, fmt.Sprint(c), "pids")
		cmds = append(cmds, fmt.Sprintf("echo $$ > %[1]q.tmp && mv %[1]q.tmp %[1]q", p))
	}
	return strings.Join(cmds, " && ") + " && echo listed; " + gate
}

// A job queued for card 1 that opens cards 0 and 2 is advised to ask for
// every card it opens, in order (--device 0,1,2); each card is counted
// once in tt_device_queue.card.cross_card and logged once, however many
// scans see it.
func TestCrossCard_AdviceMetricAndOneLogLine(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	var logs cmdtest.Buffer
	b, tree := setupHolders(t, func(o *Options) {
		o.Devices = []int{0, 1, 2}
		o.CrossCardInterval = 10 * time.Millisecond
		o.MeterProvider = mp
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	tree.SetPids(2)
	gate, release := b.gate()
	defer release()
	j := b.submit(1, listOn(b, []int{1, 0, 2}, gate))
	poll(t, "the job seen on cards 0 and 2", func() bool {
		info, _ := b.s.Job(j.ID)
		return slices.Equal(info.CrossCards, []int{0, 2})
	})
	time.Sleep(100 * time.Millisecond) // ten more scans see it again
	for _, card := range []int{0, 2} {
		x := b.s.Status().Cards[card].CrossCard
		if len(x) != 1 || !strings.Contains(x[0].Advice(), "queue it with --device 0,1,2 ") {
			t.Errorf("card %d's advice: %+v", card, x)
		}
	}
	r := collect(t, reader)
	for card, want := range map[int]int64{0: 1, 1: 0, 2: 1} {
		if got := r.counter(t, MetricCrossCard, attribute.Int("card", card)); got != want {
			t.Errorf("%s on card %d = %d, want %d", MetricCrossCard, card, got, want)
		}
	}
	if n := strings.Count(logs.String(), "also opened card"); n != 2 {
		t.Errorf("logged %d times, want once a card:\n%s", n, logs.String())
	}
}

// A job queued for card 1 whose process opens card 0 too is shown as such
// in card 0's status, in its record and in the log; with
// TT_DEVICE_CROSS_CARD=kill it is ended.
func TestCrossCard_DetectedAndKilled(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{CrossCardWarn, CrossCardKill} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			b, _ := setupHolders(t, func(o *Options) {
				o.CrossCard = policy
				o.CrossCardInterval = 20 * time.Millisecond
			})
			gate, release := b.gate()
			defer release()
			j := b.submit(1, listOn(b, []int{1, 0}, gate))
			if policy == CrossCardWarn {
				// With kill, the job may be ended before it says so.
				b.waitOutput(j.ID, "listed")
			}
			poll(t, "the job seen on card 0", func() bool {
				info, _ := b.s.Job(j.ID)
				return slices.Contains(info.CrossCards, 0)
			})
			if policy == CrossCardKill {
				done := b.waitDone(j.ID)
				if done.Outcome != store.OutcomeKilled || !strings.Contains(done.Error, "opened card 0 outside its own") || !slices.Equal(done.CrossCards, []int{0}) {
					t.Errorf("killed for card 0: %s %q %v", done.Outcome, done.Error, done.CrossCards)
				}
				return
			}
			c0 := b.s.Status().Cards[0]
			if len(c0.CrossCard) != 1 || c0.CrossCard[0].JobID != j.ID ||
				!strings.Contains(c0.CrossCard[0].Advice(), "on card 1 also opened card 0: tt-metal opens every card it sees; queue it with --device 0,1 or pass TT_VISIBLE_DEVICES") {
				t.Errorf("card 0's status: %+v", c0.CrossCard)
			}
			release()
			if done := b.waitDone(j.ID); done.Outcome != store.OutcomeSuccess || !slices.Equal(done.CrossCards, []int{0}) {
				t.Errorf("the job's record: %s %v", done.Outcome, done.CrossCards)
			}
		})
	}
}

// sysfsTree is the sys directory of a fake host kind under testdata.
func sysfsTree(t *testing.T, kind string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "sysfs", kind, "sys")
}

// With TT_DEVICE_VISIBLE=bdf a job sees TT_VISIBLE_DEVICES, the PCI
// addresses of its cards; its own TT_VISIBLE_DEVICES wins; status names
// each card's board.
func TestVisible_PCIAddressesOfItsCards(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) {
		o.Devices = []int{0, 1, 2, 3}
		o.SysfsPath = sysfsTree(t, "quietbox")
		o.GateOff = true // a fixture's heartbeat never moves; fitness_test.go tests the gate
		o.VisibleBDF = true
	})
	one := b.submit(2, `echo "$TT_VISIBLE_DEVICES"`)
	two := b.submitOn([]int{1, 3}, "1,3", `echo "$TT_VISIBLE_DEVICES"`)
	own, err := b.s.Submit(JobSpec{Card: 0, Cmd: `echo "$TT_VISIBLE_DEVICES"`, Cwd: b.work, Env: map[string]string{"TT_VISIBLE_DEVICES": "0"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id, want string
	}{{one.ID, "0000:03:00.0\n"}, {two.ID, "0000:02:00.0,0000:04:00.0\n"}, {own.ID, "0\n"}} {
		b.waitDone(tc.id)
		if got := output(t, b, tc.id); got != tc.want {
			t.Errorf("TT_VISIBLE_DEVICES = %q, want %q", got, tc.want)
		}
	}
	st := b.s.Status()
	if c := st.Cards[3]; c.Identity.PCIAddress != "0000:04:00.0" || c.Identity.Info.CardType != "p150a" || c.Identity.Info.Serial == "" {
		t.Errorf("card 3's identity: %+v %q", c.Identity, c.IdentityError)
	}
	// A card sysfs does not know fails the job rather than run it
	// unrestricted.
	b2 := setup(t, func(o *Options) {
		o.Devices = []int{0, 7}
		o.SysfsPath = sysfsTree(t, "quietbox")
		o.GateOff = true // a fixture's heartbeat never moves; fitness_test.go tests the gate
		o.VisibleBDF = true
	})
	bad := b2.submit(7, "echo never")
	if done := b2.waitDone(bad.ID); done.Outcome != store.OutcomeFailure || !strings.Contains(done.Error, "PCI address of card 7") {
		t.Errorf("a card without sysfs: %s %q", done.Outcome, done.Error)
	}
}
