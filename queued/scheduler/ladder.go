package scheduler

import (
	"fmt"
	"strings"
	"time"

	"github.com/ttkit/ttkit/queued/runner"
)

// The recovery ladder. A reset job climbs it: the reset command, the
// deep reset command (when one is configured), then each of the site's
// rungs (TT_DEVICE_RECOVERY_CMDS), in order. After each rung the card is
// verified: the health check must pass AND the fitness gate (device node
// and sysfs entry back, the heartbeat moving on fresh reads, the site
// probe TT_DEVICE_GATE_CMD when set). A rung's exit status alone never
// counts as recovered: tt-smi -r exits 0 when the reset did not work. The
// first verified rung ends the climb; when none is, the ladder is
// exhausted and the card is dead, with each rung's evidence in the reset's
// log and record. Before the first rung the reset waits while someone
// else's process holds the card (foreignwait.go).

// Rung is one of the site's own rungs of the recovery ladder, climbed
// after the reset and the deep reset: a shell command with {device}
// substituted (nothing is appended), bounded by Timeout.
type Rung struct {
	Cmd     string
	Timeout time.Duration
}

// ladderRung is one rung as a reset job climbs it.
type ladderRung struct {
	name       string // as the log and status name it: "reset", "deep reset", "site rung 1"
	label      string // the metric's rung attribute: reset, deep_reset, site_1
	cmd        string
	appendCard bool
	timeout    time.Duration
}

// rungs is the ladder the controls make.
func (c *Controls) rungs() []ladderRung {
	rs := []ladderRung{{name: "reset", label: "reset", cmd: c.Reset, appendCard: true, timeout: c.ResetTimeout}}
	if c.DeepReset != "" {
		rs = append(rs, ladderRung{name: "deep reset", label: "deep_reset", cmd: c.DeepReset, appendCard: true, timeout: c.DeepResetTimeout})
	}
	for i, r := range c.Site {
		rs = append(rs, ladderRung{name: fmt.Sprintf("site rung %d", i+1), label: fmt.Sprintf("site_%d", i+1), cmd: r.Cmd, timeout: r.Timeout})
	}
	return rs
}

// Outcomes of one rung, the metric's outcome attribute.
const (
	// RungRecovered: the rung ran, the health check and the gate passed.
	RungRecovered = "recovered"
	// RungUnverified: the rung exited 0 but the health check or the gate
	// failed after it.
	RungUnverified = "unverified"
	// RungFailed: the rung's command failed, timed out or could not start.
	RungFailed = "failed"
)

// recovery is how a reset job's ladder went.
type recovery struct {
	ok       bool   // a rung was verified
	verified bool   // the gate verified the card (so it need not be gated afresh)
	stopped  bool   // a service stop interrupted it; it is retried after restart
	code     int    // exit code of the last command run (the failing one when !ok)
	detail   string // one line for status and the record
}

// recoverCard climbs the ladder for card into the reset job's log: it
// waits for the card to be free of someone else's process, then runs each
// rung, its health check and the gate until one is verified. Each command
// is headed in the log by "== <step>: <command>" and followed by its exit
// status; each rung by "== rung i/n: <name>" and the gate's verdict.
// base carries the shell, environment and process hooks of the reset job.
func (s resetRunner) recoverCard(card int, j *job, base runner.Spec, log *runner.Log) recovery {
	ctl := &s.opt.Controls
	if st := log.State(); st.Size > 0 {
		fmt.Fprintf(log, "== retrying the reset of card %d after a service restart\n", card)
	}
	defer s.setRung(card, "")
	if !(foreignWait{s.core}).wait(card, j, log) {
		fmt.Fprintf(log, "== reset of card %d interrupted by a service stop; it runs again after the restart\n", card)
		return recovery{stopped: true, detail: "interrupted by a service stop"}
	}
	step := func(name, tmpl string, appendCard bool, timeout time.Duration) recovery {
		spec := base
		spec.Cmd = Expand(tmpl, card, appendCard)
		spec.Timeout = timeout
		spec.Repeat = 1
		fmt.Fprintf(log, "== %s: %s\n", name, spec.Cmd)
		began := time.Now()
		res := runner.Run(spec, log, j.stop)
		took := time.Since(began).Round(time.Millisecond)
		r := recovery{code: res.ExitCode}
		switch {
		case res.Stopped:
			r.stopped = true
			r.detail = fmt.Sprintf("%s interrupted by a service stop", name)
		case res.Err != nil:
			r.detail = fmt.Sprintf("%s could not start: %v", name, res.Err)
		case res.TimedOut:
			r.detail = fmt.Sprintf("%s timed out after %s", name, timeout)
		case res.ExitCode != 0:
			r.detail = fmt.Sprintf("%s exited %d", name, res.ExitCode)
		default:
			r.ok = true
			r.detail = fmt.Sprintf("%s exited 0", name)
			if name == "health check" {
				r.detail = "health check passed"
			}
		}
		if a := res.Abandoned; a != nil {
			r.detail += "; " + a.Reason
		}
		fmt.Fprintf(log, "== %s: exit %d after %s (%s)\n", name, res.ExitCode, took, r.detail)
		return r
	}
	rungs := ctl.rungs()
	var evidence []string
	var last recovery
	for i, rg := range rungs {
		at := fmt.Sprintf("%s (%d/%d)", rg.name, i+1, len(rungs))
		s.setRung(card, at)
		fmt.Fprintf(log, "== rung %d/%d: %s\n", i+1, len(rungs), rg.name)
		r := step(rg.name, rg.cmd, rg.appendCard, rg.timeout)
		seen := r.detail
		outcome := RungFailed
		if r.ok {
			outcome = RungUnverified
			r = step("health check", ctl.HealthCheck, false, ctl.HealthCheckTimeout)
			seen += ", " + r.detail
		}
		if r.ok {
			why, stopped := s.fit.verify(card, j.stop)
			if stopped {
				r = recovery{stopped: true}
			} else if why != "" {
				fmt.Fprintf(log, "== gate on card %d after the %s: %s\n", card, rg.name, why)
				seen += ", gate: " + why
				r.ok = false
			} else {
				fmt.Fprintf(log, "== gate on card %d after the %s: passed\n", card, rg.name)
				outcome = RungRecovered
			}
		}
		if r.stopped {
			fmt.Fprintf(log, "== reset of card %d interrupted by a service stop; it runs again after the restart\n", card)
			return recovery{stopped: true, detail: "interrupted by a service stop"}
		}
		s.met.rungEnded(card, rg.label, outcome)
		if r.ok {
			r.verified = true
			r.detail = fmt.Sprintf("recovered by the %s (rung %d/%d): health check and gate passed", rg.name, i+1, len(rungs))
			fmt.Fprintf(log, "== card %d %s\n", card, r.detail)
			return r
		}
		evidence = append(evidence, seen)
		last = r
		fmt.Fprintf(log, "== rung %d/%d (%s) did not recover card %d: %s\n", i+1, len(rungs), rg.name, card, seen)
	}
	last.detail = strings.Join(evidence, "; ")
	if len(rungs) > 1 {
		last.detail = "every rung failed: " + last.detail
	}
	fmt.Fprintf(log, "== card %d is dead: %s\n", card, last.detail)
	return last
}

// setRung shows the rung running on card ("" for none) in status.
func (s resetRunner) setRung(card int, rung string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.cards[card]; c.rung != rung {
		c.rung = rung
		s.changes.bump()
	}
}

// verify is the gate after a rung: fresh reads of the card's node, sysfs
// entry and heartbeat, which must move between two reads heartbeatGap
// apart within verifyWindow (firmware may take a moment to come back
// after a reset), then the site probe when one is set. It returns why the
// card is still unfit ("" when it is fit), publishing the verdict, or
// stopped when stop closed first. Without a gate (GateOff) the card
// passes.
func (f *fitness) verify(card int, stop <-chan struct{}) (why string, stopped bool) {
	s := f.samplers[card]
	if s == nil {
		return "", false
	}
	deadline := time.Now().Add(f.verifyWindow())
	s.mu.Lock()
	s.judged, s.hbOK = false, false
	s.readLocked(time.Now())
	why = s.verdict
	// Without a heartbeat to judge, one read decides.
	done := why == "" && !s.hbOK
	s.mu.Unlock()
	for !done {
		t := time.NewTimer(heartbeatGap)
		select {
		case <-stop:
			t.Stop()
			return "", true
		case <-t.C:
		}
		s.mu.Lock()
		s.readLocked(time.Now())
		why = s.verdict
		judged := s.judged
		s.mu.Unlock()
		switch {
		case why == "" && judged:
			done = true
		case time.Now().After(deadline):
			if why == "" {
				why = "heartbeat not judged within " + f.verifyWindow().String()
			}
			done = true
		}
	}
	if why == "" && f.core.opt.GateCmd != "" {
		s.probeMu.Lock()
		s.probeDue.Store(false)
		why = f.runProbe(card)
		s.mu.Lock()
		s.probeFail, s.probeAt = why, time.Now()
		s.mu.Unlock()
		s.probeMu.Unlock()
	}
	s.mu.Lock()
	verdict := s.verdictLocked()
	s.mu.Unlock()
	f.publish(card, verdict)
	return why, false
}

// verifyWindow is how long the gate after a rung waits for the heartbeat
// to move: a sample interval, and at least two heartbeat gaps.
func (f *fitness) verifyWindow() time.Duration {
	return max(2*heartbeatGap, f.core.opt.GateInterval)
}

// withinHourlyBound reports whether the sampler's card may have another
// automatic ladder now: fewer than RecoveryMaxPerHour in the last hour.
// When it may not, the card's status says so and what to do; the note
// clears once a ladder may run again. Called from the sampler's loop.
func (f *fitness) withinHourlyBound(sm *sampler) bool {
	s := f.core
	now := time.Now()
	keep := sm.autoLadders[:0]
	for _, t := range sm.autoLadders {
		if now.Sub(t) < time.Hour {
			keep = append(keep, t)
		}
	}
	sm.autoLadders = keep
	note := ""
	if n := len(keep); n >= s.opt.RecoveryMaxPerHour {
		note = fmt.Sprintf("automatic recovery paused: %d ladders in the last hour (TT_DEVICE_RECOVERY_MAX_PER_HOUR=%d), the next one at %s; `reset --device %d` tries now",
			n, s.opt.RecoveryMaxPerHour, keep[0].Add(time.Hour).Format("15:04:05"), sm.card)
	}
	s.mu.Lock()
	if c := s.cards[sm.card]; c.autoPaused != note {
		if note != "" {
			s.log.Warn("card stays unfit: its automatic recoveries reached their bound per hour", "card", sm.card, "ladders", len(keep))
		}
		c.autoPaused = note
		s.changes.bump()
	}
	s.mu.Unlock()
	return note == ""
}
