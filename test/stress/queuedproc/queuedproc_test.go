package queuedproc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func TestReadUsage(t *testing.T) {
	u, err := ReadUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSS <= 0 || u.PeakRSS < u.RSS || u.CPU < 0 {
		t.Errorf("implausible usage of this test: %+v", u)
	}
	if _, err := ReadUsage(-1); err == nil {
		t.Error("no error for pid -1")
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 5}, {90, 9}, {99, 10}, {100, 10}, {1, 1}} {
		if got := Percentile(ds, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if Percentile(nil, 50) != 0 {
		t.Error("percentile of nothing is not 0")
	}
}

// TestGate: a shell blocked on the gate finishes once it opens.
func TestGate(t *testing.T) {
	g, err := NewGate(filepath.Join(t.TempDir(), "it's a gate"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", g.Cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := g.Open(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("gate job: %v", err)
	}
}

func TestReadHostCPU(t *testing.T) {
	a, err := ReadHostCPU()
	if err != nil {
		t.Fatal(err)
	}
	// Burn a little CPU so the counters move.
	for deadline := time.Now().Add(30 * time.Millisecond); time.Now().Before(deadline); {
	}
	b, err := ReadHostCPU()
	if err != nil {
		t.Fatal(err)
	}
	if b.total < a.total || b.steal < a.steal {
		t.Fatalf("counters went back: %+v then %+v", a, b)
	}
	if s := b.StealSince(a); s < 0 || s > 1 {
		t.Errorf("steal share %v outside [0, 1]", s)
	}
	if s := a.StealSince(a); s != 0 {
		t.Errorf("steal over no time = %v, want 0", s)
	}
	if s := (HostCPU{total: 200, steal: 50}).StealSince(HostCPU{total: 100, steal: 25}); s != 0.25 {
		t.Errorf("steal of 25 in 100 = %v, want 0.25", s)
	}
}
