package cli

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/lipgloss"

	"github.com/ttkit/ttkit/queued/api"
)

// TestWatchFrame_HoldsAndFit: a hold shows who holds the card, a queued
// hold is named as one, and the frame fits the width and height given.
func TestWatchFrame_HoldsAndFit(t *testing.T) {
	now := time.Now()
	started := now.Add(-90 * time.Second)
	st := api.Status{Cards: []api.CardStatus{{
		DeviceID: "0", State: "healthy",
		Current: &api.JobSummary{ID: "aaaaaaaa11112222", Kind: "hold", Owner: "alice", StartedAt: &started},
		Pending: []api.JobSummary{{ID: "bbbbbbbb33334444", Kind: "hold", Owner: "bob", Position: 1}},
	}}}
	styles := newWatchStyles(lipgloss.NewRenderer(io.Discard), false)
	f := watchFrame{st: &st, now: now, tails: map[string][]string{}}
	out := f.render(styles)
	for _, want := range []string{"held by alice for 1m30s", "1. bbbbbbbb  bob  (hold)"} {
		if !strings.Contains(out, want) {
			t.Errorf("the frame lacks %q:\n%s", want, out)
		}
	}
	f.width, f.height = 20, 4
	lines := strings.Split(f.render(styles), "\n")
	if len(lines) != 4 || !strings.Contains(lines[3], "more lines") {
		t.Errorf("a 20x4 frame is %d lines:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, l := range lines {
		if lipgloss.Width(l) > 20 {
			t.Errorf("line %q is wider than 20", l)
		}
	}
}

// TestTailLines: the last lines, a progress bar's line as it ends up.
func TestTailLines(t *testing.T) {
	got := tailLines([]byte("a\nb\n10%\r50%\r100%\r\nc"), 2)
	if strings.Join(got, "|") != "100%|c" {
		t.Fatalf("tailLines = %q", got)
	}
	if got := tailLines([]byte("x\n"), 0); got != nil {
		t.Fatalf("tailLines(n=0) = %q", got)
	}
}
