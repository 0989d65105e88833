package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

// status shows an unfit card's state in yellow and, under the table, why
// and since when, once (not again as a pause).
func TestStatus_ShowsAnUnfitCardAndWhy(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 45, 0, 0, time.UTC)
	since := now.Add(-3 * time.Minute)
	st := api.Status{Cards: []api.CardStatus{
		{DeviceID: "1", State: "unfit", Reason: "heartbeat stalled since 10:42:03", UnfitSince: &since,
			Worker: "paused: card unfit: heartbeat stalled since 10:42:03", PausedReason: "card unfit: heartbeat stalled since 10:42:03",
			Pending: []api.JobSummary{{ID: "b1"}}},
	}}
	var plain, coloured bytes.Buffer
	writeStatus(&plain, st, "unix:///s", now, false)
	writeStatus(&coloured, st, "unix:///s", now, true)
	out := plain.String()
	if !strings.Contains(out, "1     unfit  paused") {
		t.Errorf("status lacks the unfit row:\n%s", out)
	}
	note := "card 1: unfit since " + since.Local().Format("2006-01-02 15:04:05") + " (3m00s ago): heartbeat stalled since 10:42:03; its jobs stay queued until the gate passes again"
	if !strings.Contains(out, note) {
		t.Errorf("status lacks %q:\n%s", note, out)
	}
	if strings.Contains(out, "paused: card unfit") {
		t.Errorf("the reason is shown twice:\n%s", out)
	}
	if !strings.Contains(coloured.String(), yellow+"unfit") {
		t.Errorf("coloured status lacks a yellow unfit:\n%q", coloured.String())
	}
}
