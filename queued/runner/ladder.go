package runner

import (
	"syscall"
	"time"
)

// The kill ladder: how a job is stopped (a kill, a reset, a service stop,
// a timeout, an idle timeout). SIGINT first, which tt-metal handles by
// closing the device; SIGTERM after Spec.KillGrace; SIGKILL after
// Spec.TermGrace. A SIGKILL too soon can leave a card wedged (see
// docs/job-endings.md for the evidence behind the defaults), so each
// rung waits for the process to close the device itself.

// ladder is one iteration's climb: the rung reached, the timer to the
// next, and how to send a signal to the iteration's process group.
type ladder struct {
	spec  *Spec
	pgid  int
	rung  syscall.Signal // 0 (not begun), SIGINT, SIGTERM or SIGKILL
	timer *time.Timer
	// C fires when the current rung's grace is over; nil while no grace
	// runs.
	C    <-chan time.Time
	kill func() // SIGKILL to everything of the iteration
	// direct is set when SIGKILL came before any other rung (a start
	// that never reached the program has nothing to let close a device).
	direct bool
}

// begin starts the climb, unless it has begun: SIGINT, to the program if
// it runs already (running), else as soon as it does (see resend).
func (l *ladder) begin(running bool) {
	if l.rung != 0 {
		return
	}
	l.rung = syscall.SIGINT
	if running {
		syscall.Kill(-l.pgid, syscall.SIGINT)
	}
	l.wait(l.spec.KillGrace)
}

// next climbs one rung when the current one's grace is over.
func (l *ladder) next(running bool) {
	l.C = nil
	switch l.rung {
	case syscall.SIGINT:
		l.rung = syscall.SIGTERM
		if running {
			syscall.Kill(-l.pgid, syscall.SIGTERM)
		}
		l.wait(l.spec.TermGrace)
	case syscall.SIGTERM:
		l.killed()
	}
}

// killed records that SIGKILL was sent (by the ladder, or at once by a
// start that did not finish) and sends it.
func (l *ladder) killed() {
	l.direct = l.rung == 0
	l.rung, l.C = syscall.SIGKILL, nil
	l.kill()
}

// resend sends the rung reached to a program that has just started:
// while only queued's helper ran, the signal would simply have killed it.
func (l *ladder) resend() {
	if l.rung == syscall.SIGINT || l.rung == syscall.SIGTERM {
		syscall.Kill(-l.pgid, l.rung)
	}
}

func (l *ladder) wait(d time.Duration) {
	if l.timer == nil {
		l.timer = time.NewTimer(d)
	} else {
		l.timer.Reset(d)
	}
	l.C = l.timer.C
}

func (l *ladder) stop() {
	if l.timer != nil {
		l.timer.Stop()
	}
}

// idleWatch tells when an iteration has written nothing for
// Spec.IdleTimeout: C fires at the earliest moment it could have, and
// silent checks.
type idleWatch struct {
	limit time.Duration
	since time.Time // the program's start
	last  func() time.Time
	timer *time.Timer
	C     <-chan time.Time
}

// arm starts watching from the program's start; a zero limit watches
// nothing.
func (w *idleWatch) arm(now time.Time) {
	if w.limit <= 0 {
		return
	}
	w.since = now
	w.timer = time.NewTimer(w.limit)
	w.C = w.timer.C
}

// silent reports whether the limit has passed since the last output (or
// the start); if not, it waits again for the rest.
func (w *idleWatch) silent(now time.Time) bool {
	last := w.since
	if t := w.last(); t.After(last) {
		last = t
	}
	left := w.limit - now.Sub(last)
	if left <= 0 {
		w.C = nil
		return true
	}
	w.timer.Reset(left)
	return false
}

func (w *idleWatch) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// text says which signals the ladder sent, for the notes a job's output
// gets.
func (l *ladder) text() string {
	if l.direct {
		return "SIGKILL"
	}
	return ladderText(l.rung)
}

// ladderText says which signals the ladder sent, up to rung, for the
// notes a job's output gets.
func ladderText(rung syscall.Signal) string {
	switch rung {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGINT, then SIGTERM"
	case syscall.SIGKILL:
		return "SIGINT, SIGTERM, then SIGKILL"
	}
	return "no signal"
}

// killNote is what the notes say was sent: the run's own words, or those
// of its last rung when it kept none (its time ran out between
// iterations: no signal).
func (r Result) killNote() string {
	if r.killText != "" {
		return r.killText
	}
	return ladderText(r.KillSignal)
}
