package scheduler

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ttkit/ttkit/internal/ttsysfs"
)

// heartbeatGap is the least time between two reads of a heartbeat that
// may judge it stalled: tt-device-mcp reads the ARC heartbeat twice 0.5 s
// apart, so a firmware that is alive moves it within that.
const heartbeatGap = 500 * time.Millisecond

// sampler reads one card's cheap fitness signals (its device node, its
// sysfs entry, its firmware heartbeat) and keeps the verdict of the last
// read. Its loop reads every GateInterval; the gate before a job uses the
// verdict and reads afresh only when it is older than two intervals. Its
// fields are under mu, which is never held while core.mu is taken.
type sampler struct {
	f    *fitness
	card int
	node string // the card's device node

	mu      sync.Mutex
	at      time.Time // when the last read was (wall clock)
	hb      uint64    // the heartbeat then
	hbOK    bool      // the driver has a heartbeat for the card
	hbSince time.Time // when the read that first found the heartbeat at its current value ended
	judged  bool      // the heartbeat was read twice heartbeatGap apart (or is absent)
	verdict string    // why the card is unfit by its signals; "" when fit

	// The site probe (TT_DEVICE_GATE_CMD): due at start and after a job
	// that ended badly; probeMu is held while it runs so it runs once.
	probeDue  atomic.Bool
	probeMu   sync.Mutex
	probeFail string    // why the last run failed; "" when it passed (under mu)
	probeAt   time.Time // when it last ran (under mu)

	lastAuto    time.Time   // the last automatic recovery asked (the loop's own)
	autoLadders []time.Time // the automatic recoveries asked in the last hour (the loop's own)
}

// readLocked takes a fresh read of the card's signals and judges them;
// mu is held. now is the clock taken before the read. The heartbeat is
// stalled only when it stood still from the end of one read to the start
// of another at least heartbeatGap later: a reader preempted between its
// clock and its read (a busy host) must not count that wait as the card's
// silence.
func (s *sampler) readLocked(now time.Time) {
	f := s.f
	nodeOK, nodeJudged := true, false
	if _, err := os.Stat(s.node); err == nil {
		f.devSeen.Store(true)
		nodeJudged = true
	} else if _, derr := os.Stat(filepath.Dir(s.node)); derr == nil || f.devSeen.Load() {
		// The directory of nodes is there (or was): the node is missing.
		// A host that never had one (cards named by TT_DEVICE_IDS, no
		// driver) is not judged, as config.Discover's callers do.
		if derr == nil {
			f.devSeen.Store(true)
		}
		nodeOK, nodeJudged = false, true
	}
	p, err := ttsysfs.ReadPresence(f.core.opt.SysfsPath, s.card)
	read := time.Now() // the value was this at the latest then
	if p.Class {
		f.classSeen.Store(true)
	}
	switch {
	case nodeJudged && !nodeOK:
		s.verdict = "device node " + s.node + " is missing"
	case err != nil:
		s.verdict = fmt.Sprintf("cannot read its sysfs entry: %v", err)
	case f.classSeen.Load() && !p.Entry:
		s.verdict = fmt.Sprintf("no sysfs entry tenstorrent!%d under %s: the driver does not see the card", s.card,
			filepath.Join(f.core.opt.SysfsPath, "class", "tenstorrent"))
	default:
		s.verdict = ""
	}
	switch {
	case !p.Heartbeat.OK:
		s.hbOK, s.judged = false, true // no heartbeat to judge: not judged, never unfit for it
	case !s.hbOK || p.Heartbeat.Value != s.hb:
		if s.hbOK {
			s.judged = true // seen moving
		} else {
			s.judged = false // one read: the next one judges
		}
		s.hbOK, s.hb, s.hbSince = true, p.Heartbeat.Value, read
	case now.Sub(s.hbSince) >= heartbeatGap:
		s.judged = true
		if s.verdict == "" {
			s.verdict = "heartbeat stalled since " + s.hbSince.Format("15:04:05")
		}
	}
	s.at = now
}

// fresh reads the card afresh when its last read is too old to judge by
// (older than staleAfter, or a first heartbeat read not yet followed by a
// second), waiting out what is left of heartbeatGap since the first; and
// returns the verdict, the site probe's included.
func (s *sampler) fresh(staleAfter time.Duration) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at.IsZero() || time.Since(s.at) > staleAfter {
		s.readLocked(time.Now())
	}
	if s.hbOK && !s.judged {
		// One read of the heartbeat (at start, or after a reset): the
		// second, heartbeatGap after it, judges it.
		if wait := heartbeatGap - time.Since(s.hbSince); wait > 0 {
			s.mu.Unlock()
			time.Sleep(wait)
			s.mu.Lock()
		}
		s.readLocked(time.Now())
	}
	return s.verdictLocked()
}

// verdictLocked is why the card is unfit, its signals first, then the
// site probe; "" when it is fit.
func (s *sampler) verdictLocked() string {
	if s.verdict != "" {
		return s.verdict
	}
	return s.probeFail
}

// loop reads the card every GateInterval until Stop, publishing each
// verdict, running the site probe at start, waking the worker when a
// failed probe is due again, and asking for the card's recovery while it
// stays unfit.
func (s *sampler) loop() {
	defer s.f.core.loops.Done()
	f := s.f
	s.mu.Lock()
	s.readLocked(time.Now())
	s.mu.Unlock()
	s.probeIfNeeded() // at start: every card, before its first job
	t := time.NewTicker(f.core.opt.GateInterval)
	defer t.Stop()
	for {
		s.mu.Lock()
		if !s.at.IsZero() && time.Since(s.at) >= f.core.opt.GateInterval/2 {
			s.readLocked(time.Now())
		}
		verdict := s.verdictLocked()
		// One heartbeat read since start or a reset proves nothing yet:
		// "fit" waits for the read that judges it, so a reset that left
		// the heartbeat stalled never shows the card fit in between.
		unjudged := verdict == "" && s.hbOK && !s.judged
		retry := s.probeFail != "" && time.Since(s.probeAt) >= f.probeRetry()
		s.mu.Unlock()
		if !unjudged {
			f.publish(s.card, verdict)
		}
		if retry {
			f.core.cards[s.card].wakeup() // its worker's gate runs the probe again
		}
		f.recover(s)
		select {
		case <-f.core.quit:
			return
		case <-t.C:
		}
	}
}

// probeIfNeeded runs the site probe on the card when it is needed (see
// probeNeeded), after waiting for a run already going on, and records how
// it went.
func (s *sampler) probeIfNeeded() {
	s.probeMu.Lock()
	defer s.probeMu.Unlock()
	if !s.probeNeeded() {
		return
	}
	s.probeDue.Store(false)
	why := s.f.runProbe(s.card)
	select {
	case <-s.f.stop:
		// A service stop ended it: it proved nothing, and runs again at
		// the next start.
		s.probeDue.Store(true)
		return
	default:
	}
	s.mu.Lock()
	s.probeFail, s.probeAt = why, time.Now()
	verdict := s.verdictLocked()
	s.mu.Unlock()
	s.f.publish(s.card, verdict)
}

// probeNeeded says the site probe must run before the card's next job:
// it is due, or it failed and probeRetry has passed.
func (s *sampler) probeNeeded() bool {
	if s.f.core.opt.GateCmd == "" {
		return false
	}
	if s.probeDue.Load() {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.probeFail != "" && time.Since(s.probeAt) >= s.f.probeRetry()
}

// nodePath is card n's device node under dir.
func nodePath(dir string, n int) string { return filepath.Join(dir, strconv.Itoa(n)) }
