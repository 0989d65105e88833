package scheduler

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
)

// Fitness. Before a job starts on a card (on every card of a job of
// several), the gate makes sure the card is fit: its device node is
// there, the driver's sysfs entry for it is there, its firmware heartbeat
// (tt_heartbeat, where the driver has one) moved between the last two
// reads, and the site's probe (TT_DEVICE_GATE_CMD), when one is set and
// due, passed. A sampler per card (sampler.go) reads the cheap signals
// every GateInterval, so the gate costs a dispatch a lock and a look at
// the last verdict, and a fresh read only when that is older than two
// intervals. An unfit card holds its jobs: they stay queued, with the
// reason in status, and queued asks for the card's reset by itself (at
// most once per RecoveryCooldown); the card is fit again when the gate
// passes. After a restart of queued nothing is trusted: the probe runs
// on every card at start, and a heartbeat is judged on two reads before
// the first job.

// fitness is the gate and its samplers, one per card (none with GateOff).
type fitness struct {
	core     *core
	samplers map[int]*sampler // read-only after New
	// devSeen and classSeen remember that the host has shown a directory
	// of device nodes and the driver's sysfs class: from then on, a card
	// missing from either is unfit. A host that never showed them (cards
	// named by TT_DEVICE_IDS without the driver) is not judged on them.
	devSeen, classSeen atomic.Bool
	stop               chan struct{} // closed by Stop: ends a running probe
	stopOnce           sync.Once
}

func newFitness(c *core) *fitness {
	f := &fitness{core: c, samplers: map[int]*sampler{}, stop: make(chan struct{})}
	if c.opt.GateOff {
		return f
	}
	for _, id := range c.order {
		s := &sampler{f: f, card: id, node: nodePath(c.opt.DevDir, id)}
		s.probeDue.Store(c.opt.GateCmd != "")
		f.samplers[id] = s
	}
	return f
}

// start runs every card's sampler; Stop ends them.
func (f *fitness) start() {
	for _, id := range f.core.order {
		if s := f.samplers[id]; s != nil {
			f.core.loops.Add(1)
			go s.loop()
		}
	}
}

// close ends a probe that runs, so Stop does not wait for its timeout.
func (f *fitness) close() { f.stopOnce.Do(func() { close(f.stop) }) }

// staleAfter is how old a verdict the gate takes without a fresh read.
func (f *fitness) staleAfter() time.Duration { return 2 * f.core.opt.GateInterval }

// probeRetry is how long after a failed site probe it runs again while
// the card holds a job: six sample intervals (30 s by default).
func (f *fitness) probeRetry() time.Duration { return 6 * f.core.opt.GateInterval }

// gatedJob says j passes the gate before it starts: a job, or a hold
// taken for the first time. Resets never wait for fitness (they are how
// an unfit card recovers), nor does a hold taken again after a restart
// (its Slurm job already uses the card).
func gatedJob(j *job) bool {
	return j.rec.Kind == store.KindJob || j.rec.Kind == store.KindHold && j.rec.StartedAt.IsZero()
}

// dueLocked returns the cards the worker of c gates before it may take
// the head of its queue, or nil when there is nothing to gate. Of a job
// of several cards, only the free ones: one busy with another job is
// gated (its probe run) once it is free, never under that job.
func (f *fitness) dueLocked(c *card) []int {
	s := f.core
	if len(f.samplers) == 0 || s.stopping || s.persist.err != nil || c.current != nil || c.dead != nil || len(c.queue) == 0 {
		return nil
	}
	head := c.head() // a job waiting for a dependency is not held by the gate
	if head == nil || !head.durable || !gatedJob(head) {
		return nil
	}
	var free []int
	for _, cd := range s.cardsOf(head) {
		if cd.current == nil {
			free = append(free, cd.id)
		}
	}
	return free
}

// probing reports whether the gate of cards will run a site probe.
func (f *fitness) probing(cards []int) bool {
	for _, id := range cards {
		if s := f.samplers[id]; s != nil && s.probeNeeded() {
			return true
		}
	}
	return false
}

// gate judges cards now, before a job of them may start: the site probe
// where it is due, then the last verdict of each sampler (or a fresh read
// when it is stale); each verdict is published to its card. It is called
// without the core's lock.
func (f *fitness) gate(cards []int) {
	began := time.Now()
	held := false
	for _, id := range cards {
		s := f.samplers[id]
		if s == nil {
			continue
		}
		s.probeIfNeeded()
		v := s.fresh(f.staleAfter())
		if v != "" {
			held = true
		}
		f.publish(id, v)
	}
	if len(cards) > 0 {
		f.core.met.gateTook(cards[0], time.Since(began), held)
	}
}

// publish makes verdict the card's fitness (unfit for that reason, or fit
// when ""), logs a change and wakes the workers when the card turned fit
// (a job of several cards may wait for this one).
func (f *fitness) publish(id int, verdict string) {
	s := f.core
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cards[id]
	if c.unfit == verdict {
		return
	}
	switch {
	case verdict == "":
		s.log.Info("card is fit again: the gate passed", "card", id, "was", c.unfit)
		c.unfitSince = time.Time{}
		s.wakeAllLocked()
	case c.unfit == "":
		s.log.Warn("card is unfit: its jobs wait until the gate passes", "card", id, "reason", verdict)
		c.unfitSince = s.opt.Now()
	}
	c.unfit = verdict
	s.changes.bump()
}

// recover asks for the reset of the sampler's card while it is unfit,
// not dead, and has no reset pending, at most once per RecoveryCooldown;
// a reset already pending is joined rather than doubled. The reset lets
// the card's running job finish (a later rung of the ladder may stop it).
func (f *fitness) recover(sm *sampler) {
	s := f.core
	if s.opt.RecoveryCooldown < 0 {
		return
	}
	s.mu.Lock()
	c := s.cards[sm.card]
	why := c.unfit
	want := why != "" && c.dead == nil && c.reset == nil && !s.stopping && s.persist.err == nil &&
		s.opt.Controls.Reset != "" && s.opt.Controls.HealthCheck != ""
	s.mu.Unlock()
	if !want || !sm.lastAuto.IsZero() && time.Since(sm.lastAuto) < s.opt.RecoveryCooldown {
		return
	}
	if !f.withinHourlyBound(sm) {
		return
	}
	sm.lastAuto = time.Now()
	sm.autoLadders = append(sm.autoLadders, sm.lastAuto)
	card := sm.card
	out, err := (resetDesk{s}).request(ResetRequest{Card: &card, NoInterrupt: true, Owner: AutoRecoveryOwner, Automatic: true})
	if err != nil {
		s.log.Error("cannot queue the recovery of an unfit card", "card", card, "reason", why, "err", err)
		return
	}
	for _, o := range out {
		s.log.Warn("recovering an unfit card: reset queued", "card", card, "reason", why, "reset", o.JobID, "joined", o.Coalesced)
	}
}

// AutoRecoveryOwner is the owner recorded on a reset queued asked for
// by itself, for a card that turned unfit.
const AutoRecoveryOwner = "queued (card unfit)"

// jobEndedLocked makes the site probe due on the cards of a job that
// ended badly (timed out, killed, ended by a signal, interrupted, hung,
// or needed SIGKILL): such a job may have left its card wedged.
func (f *fitness) jobEndedLocked(cards cardSet, rec *store.Job) {
	bad := rec.Outcome == store.OutcomeTimeout || rec.Outcome == store.OutcomeKilled || rec.Outcome == store.OutcomeInterrupted ||
		rec.Outcome == store.OutcomeHung || rec.KillRung == "SIGKILL" ||
		rec.ExitCode != nil && *rec.ExitCode < 0
	if !bad {
		return
	}
	for _, c := range cards {
		if s := f.samplers[c.id]; s != nil {
			s.probeDue.Store(true)
		}
	}
}

// resetEndedLocked makes the gate look afresh at a card a reset ran on:
// the probe is due, and the next gate reads the card rather than trust a
// verdict from before the reset.
func (f *fitness) resetEndedLocked(c *card) {
	s := f.samplers[c.id]
	if s == nil {
		return
	}
	s.probeDue.Store(true)
	s.mu.Lock()
	s.judged = false
	s.hbOK = false
	s.mu.Unlock()
}

// runProbe runs TT_DEVICE_GATE_CMD on card as resets run (as
// TT_DEVICE_RESET_USER, in the control commands' environment), bounded by
// GateTimeout, its output kept in gate-<card>.out of the output
// directory; it returns why the card is unfit, or "" when the probe
// passed.
func (f *fitness) runProbe(card int) string {
	o := &f.core.opt
	rec := store.Job{Kind: store.KindReset, Cmd: Expand(o.GateCmd, card, false), Cwd: o.Controls.Dir, Repeat: 1}
	spec, err := f.core.launch.spec(&rec)
	if err != nil {
		return fmt.Sprintf("gate command cannot run: %v", err)
	}
	spec.Timeout, spec.Repeat = o.GateTimeout, 1
	path := filepath.Join(o.OutputDir, fmt.Sprintf("gate-%d.out", card))
	log := runner.NewLog(path, 64<<10)
	began := time.Now()
	res := runner.Run(spec, log, f.stop)
	log.Close()
	took := time.Since(began).Round(time.Millisecond)
	var why string
	switch {
	case res.Stopped:
		why = "gate command interrupted by a service stop"
	case res.Err != nil:
		why = fmt.Sprintf("gate command could not start: %v", res.Err)
	case res.TimedOut:
		why = fmt.Sprintf("gate command timed out after %s", o.GateTimeout)
	case res.ExitCode != 0:
		why = fmt.Sprintf("gate command exited %d", res.ExitCode)
		if last := lastLine(path); last != "" {
			why += ": " + last
		}
	}
	if why != "" {
		f.core.log.Warn("gate command failed", "card", card, "cmd", spec.Cmd, "took", took, "reason", why, "output", path)
	}
	return why
}

// lastLine is the last non-empty line of a small file, cut to 200 bytes.
func lastLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}
