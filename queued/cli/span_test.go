package cli_test

import (
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/api"
)

// A job that needs several cards names them all: it starts when every one
// is free, sees the list as given in TT_QUEUE_DEVICE, and status, list
// and job show it on each of its cards.
func TestSpan_RunOnSeveralCards(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	g := newGate(t)
	busy := strings.TrimSpace(d.run("queue", "--device", "1", "--", g.wait()).stdout)
	d.waitState(busy, "running")
	id := strings.TrimSpace(d.run("queue", "--device", "0-1", "--", g.wait()+`; echo "cards=$TT_QUEUE_DEVICE"`).stdout)
	d.run("status").want(t, 0, []string{"card 0: idle ", ", waiting: job " + id[:8] + " takes cards 0,1 at once; waiting for card 1"}, nil)
	var st api.Status
	decode(t, d.run("--json", "status"), &st)
	if st.Cards[0].WaitingSince == nil || st.Cards[1].WaitingSince != nil {
		t.Errorf("waiting_since: card 0 %v, card 1 %v; want card 0's only", st.Cards[0].WaitingSince, st.Cards[1].WaitingSince)
	}
	g.open(t)
	d.run("result", id).want(t, 0, []string{"cards=0-1"}, nil)
	var j api.Job
	decode(t, d.run("--json", "job", id), &j)
	if j.DeviceID != "0-1" || len(j.Devices) != 2 {
		t.Errorf("the job's cards: %q %v", j.DeviceID, j.Devices)
	}
	d.run("list", "--device", "1").want(t, 0, []string{id[:8] + "  0-1"}, nil)
	d.run("queue", "--device", "1,1", "--", "true").want(t, 2, nil, []string{`card 1 is named twice`})
	d.run("queue", "--device", "0-7", "--", "true").want(t, 1, nil, []string{"no card 2", "the cards are 0, 1"})
}

// A hold takes its cards in their turn and keeps them until released:
// jobs behind it wait, a reset waits for it unless forced, its Slurm job
// id finds it, and hold --wait gives up with 124 when the cards stay busy.
func TestHold_Commands(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	g := newGate(t)
	busy := strings.TrimSpace(d.run("queue", "--device", "0", "--", g.wait()).stdout)
	d.waitState(busy, "running")
	d.run("hold", "--device", "0,1", "--reason", "slurm job 4242", "--slurm-job", "4242", "--wait=0.3s").
		want(t, 124, nil, []string{"still queued"})
	r := d.run("hold-status", "--slurm-job", "4242")
	r.want(t, 0, []string{"of cards 0,1: queued (slurm job 4242)"}, nil)
	hold := strings.Fields(r.stdout)[1]
	behind := strings.TrimSpace(d.run("queue", "--device", "1", "--", "echo behind").stdout)
	g.open(t)
	d.run("hold-status", "--wait", "--wait-timeout", "20s", hold).want(t, 0, []string{"active"}, nil)
	d.run("status").want(t, 0, []string{hold[:8] + " hold cards 0,1: slurm job 4242"}, nil)
	d.run("reset", "--device", "1").want(t, 0, []string{"behind hold " + hold + ", until it is released"}, nil)
	if j := d.waitState(behind, "queued"); j.State != "queued" {
		t.Errorf("a job behind a hold: %s", j.State)
	}
	d.run("release", "--slurm-job", "4242").want(t, 0, []string{"released hold " + hold + " of cards 0,1"}, nil)
	d.run("result", behind).want(t, 0, []string{"behind"}, nil)
	d.run("release", "--slurm-job", "4242").want(t, 0, []string{"no live hold for Slurm job 4242"}, nil)
	d.run("release", hold).want(t, 1, nil, []string{"already finished"})
	d.run("--json", "hold-status", hold).want(t, 0, []string{`"state":"done"`, `"outcome":"released"`}, nil)
	// A Slurm job's hold that has ended is shown, with how it ended, not
	// lost: a TaskProlog waiting on it learns it was released.
	d.run("hold-status", "--slurm-job", "4242").want(t, 0, []string{hold, "done", "released"}, nil)
	d.run("hold-status", "--slurm-job", "4242", "--wait=5s").want(t, 1, []string{hold, "done", "released"}, nil)
	d.run("hold-status", "--slurm-job", "9999").want(t, 1, nil, []string{"no hold for Slurm job 9999"})

	// Forced, a reset ends a hold.
	h2 := strings.TrimSpace(d.run("hold", "--device", "1", "--reason", "firmware flash", "--wait").stdout)
	d.run("reset", "--device", "1", "--force").want(t, 0, []string{"it ends hold " + h2}, nil)
	d.run("hold-status", h2).want(t, 0, []string{"done", "interrupted"}, nil)
	d.run("release").want(t, 2, nil, []string{"HOLD_ID"})
	d.run("hold", "--device", "0-", "--reason", "x").want(t, 2, nil, []string{"is not a card number"})
}
