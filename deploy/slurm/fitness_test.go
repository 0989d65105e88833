package slurm_test

import (
	"strings"
	"testing"
)

// The Prolog gates the job's cards before it holds them (`gate --wait`,
// waiting out an unfit card's recovery): a card still unfit after
// TT_SLURM_FIT_WAIT, or dead, fails the Prolog (exit 1), so Slurm drains
// the node and requeues the job, with the card and the reason in the log
// and on stderr (slurmd's log). Anything else that goes wrong with the
// gate (queued unreachable, no answer in time) is no proof of an unfit
// card: the Prolog goes on to take the hold and exits 0, as before
// (docs/slurm.md, "A card that is not fit").
func TestProlog_FailsForAnUnfitCard(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		code       int
		stderr     string
		fails      bool
		settings   []string
		wantGate   string
		wantInLogs string
	}{
		{name: "fit", code: 0, wantGate: "gate --device 1,3 --wait 600"},
		{name: "still unfit after the wait", code: 3, stderr: "tt-device-queue: card 3 is still unfit after 2m0s: heartbeat stalled since 10:42:03",
			fails: true, settings: []string{"TT_SLURM_FIT_WAIT=2m"}, wantGate: "gate --device 1,3 --wait 120",
			wantInLogs: "job 42: error: tt card(s) 1,3 not fit for this job: tt-device-queue: card 3 is still unfit after 2m0s: heartbeat stalled since 10:42:03; failing the Prolog: Slurm drains the node and requeues the job"},
		{name: "dead", code: 3, stderr: "tt-device-queue: card 1 is dead: health check exited 1", fails: true, wantGate: "gate --device 1,3 --wait 600",
			wantInLogs: "not fit for this job: tt-device-queue: card 1 is dead: health check exited 1; failing the Prolog"},
		{name: "queued unreachable", code: 1, stderr: "tt-device-queue: cannot reach queued", wantGate: "gate --device 1,3 --wait 600",
			wantInLogs: "job 42: error: cannot gate card(s) 1,3: tt-device-queue: cannot reach queued; taking the hold all the same"},
		{name: "no gate", settings: []string{"TT_SLURM_FIT_WAIT=off"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHost(t, tc.settings...)
			h.answer(t, "squeue", "job", 0, "", squeueJob(42, "n1", "tt:p150a:2(IDX:1-2)"))
			h.answer(t, "slurmd", "G", 0, "", slurmdG)
			h.answer(t, "tt-device-queue", "gate", tc.code, tc.stderr, "")
			h.answer(t, "tt-device-queue", "hold", 0, "", holdAnswer("1,3", "queued"))
			r := h.run(t, "prolog.sh", prologEnv("42", "n1")...)
			hold := "hold --device 1,3 --slurm-job 42 --json --reason slurm job 42 (alice) --for-uid 1000"
			var want []string
			if tc.wantGate != "" {
				want = append(want, tc.wantGate)
			}
			if !tc.fails {
				want = append(want, hold)
			}
			if got := strings.Join(h.cliCalls(), "|"); got != strings.Join(want, "|") {
				t.Errorf("tt-device-queue calls %q, want %q", h.cliCalls(), want)
			}
			if tc.fails {
				if r.code != 1 || !strings.Contains(r.stderr, "not fit for this job") {
					t.Errorf("prolog of an unfit card: %v", r)
				}
				if m := h.marker("42"); !strings.HasPrefix(m, "error=tt card(s) 1,3 not fit for this job: ") {
					t.Errorf("marker %q", m)
				}
			} else if r.code != 0 || h.marker("42") != "hold="+holdID+"\ncards=1,3\n" {
				t.Errorf("prolog: %v; marker %q", r, h.marker("42"))
			}
			contains(t, "log", r.log, tc.wantInLogs)
		})
	}
	t.Run("a bad wait", func(t *testing.T) {
		t.Parallel()
		h := newHost(t, "TT_SLURM_FIT_WAIT=soon")
		h.answer(t, "squeue", "job", 0, "", squeueJob(42, "n1", "tt:1(IDX:0)"))
		h.answer(t, "slurmd", "G", 0, "", slurmdG)
		r := h.run(t, "prolog.sh", prologEnv("42", "n1")...)
		if r.code != 0 || len(h.cliCalls()) != 0 {
			t.Errorf("%v; calls %q", r, h.cliCalls())
		}
		contains(t, "log", r.log, "TT_SLURM_FIT_WAIT=soon in ", "want off, or a duration such as 600, 10m or 1h30m")
	})
}

// After a job that failed, the Epilog gates its cards (the site probe
// included) before it releases the hold: an unfit card holds queued's
// jobs and queued starts its recovery; the Epilog logs it and exits 0
// (the next Prolog on the card fails if it does not recover). A job that
// succeeded, or whose hold never held its cards, costs no gate.
func TestEpilog_GatesTheCardsOfAFailedJob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, exit2, state string
		code               int
		stderr, log        string
		gate               bool
	}{
		{"failed, fit", "3:0", "active", 0, "", "job 42: gate after the failed job (exit 3:0): card(s) 1,3 fit", true},
		{"killed, unfit", "0:9", "active", 3, "tt-device-queue: card 3 is unfit: heartbeat stalled since 10:42:03",
			"job 42: gate after the failed job (exit 0:9): tt-device-queue: card 3 is unfit: heartbeat stalled since 10:42:03; its queued jobs wait and queued recovers it", true},
		{"succeeded", "0:0", "active", 0, "", "", false},
		{"failed, never held", "3:0", "queued", 0, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHost(t)
			h.setMarker(t, "42", "hold="+holdID+"\ncards=1,3\n")
			h.answer(t, "tt-device-queue", "hold-status", 0, "", `{"hold_id":"`+holdID+`","device_id":"1,3","state":"`+tc.state+`"}`+"\n")
			h.answer(t, "tt-device-queue", "gate", tc.code, tc.stderr, "")
			r := h.run(t, "epilog.sh", epilogEnv("42", tc.exit2)...)
			want := []string{"hold-status " + holdID + " --json"}
			if tc.gate {
				want = append(want, "gate --device 1,3")
			}
			want = append(want, "release --slurm-job 42")
			if r.code != 0 || strings.Join(h.cliCalls(), "|") != strings.Join(want, "|") {
				t.Errorf("calls %q, want %q\n%v", h.cliCalls(), want, r)
			}
			contains(t, "log", r.log, tc.log)
		})
	}
}
