package scheduler

import (
	"context"
	"runtime/trace"

	"github.com/ttkit/ttkit/queued/store"
)

// A job's start must be durable before its program runs, so that a
// crash never runs it twice. Committed in queue.db, that is two
// fdatasync and bbolt's own work, on the card's path between two jobs.
// The start log (store.StartsFile) makes it one sector and one
// fdatasync: the worker marks the job's start in its card's slot,
// prepares the start meanwhile, runs the job, and commits what the start
// would have committed first (the job's running record, the previous
// job's end, a changed card record) while the job runs (issue 41). A
// restart ends a job whose slot names it at its attempt as interrupted,
// whatever its record reads.
//
// A card's slot is written only by its worker, which keeps the rule that
// lets it overwrite the slot: the job the slot names has a durable
// running (or later) record. Until the commit that carries it succeeds,
// the worker commits each start in queue.db (markPending).

// markable says whether next's start may go to the start log (log): a
// job (a reset or a hold commits its start), of one card, unless the
// worker commits every start for now (commitOnly: the job the slot names
// last may have no durable record yet, or the card has no slot).
func markable(log StartLog, next *job, commitOnly bool) bool {
	return log != nil && next != nil && !commitOnly && next.rec.Kind == store.KindJob && !next.spans()
}

// markAndPrepare marks the start of rec (next's record as taken) in
// card's slot and prepares the start meanwhile on p; with an error from
// the start log, the caller commits the start instead and uses the same
// preparation.
func (s starter) markAndPrepare(p *preparer, card int, rec *store.Job) (*launchPrep, error) {
	return p.prepareBeside(rec, "dispatch: mark the start", func() error { return s.opt.Starts.MarkStart(card, rec.ID, rec.AttemptNo()) })
}

// endsCommit is a worker's commit of the jobs that ended on its card
// (with the next start's running record, and the card's record when it
// changed): before the next start, or, for a marked start, while its job
// runs.
type endsCommit struct {
	done     []*job // the ends it carries
	doneRecs []store.Job
	cards    []store.Card
	revs     []uint64
	recs     []store.Job // doneRecs and the running record
}

// landedLocked applies what became of the commit to the ends it carried:
// once it succeeded, the cards' records are saved and each ended job
// settles once what it left is swept; once it failed (err), the store is
// failing and the ends are held until it recovers. c.mu is held.
func (e endsCommit) landedLocked(c *core, err error) {
	if err != nil {
		c.persist.failLocked(err)
		for i, j := range e.done {
			c.persist.holdLocked(j, e.doneRecs[i])
		}
		return
	}
	c.savedLocked(e.cards, e.revs)
	for i, j := range e.done {
		if e.doneRecs[i].State == store.StateDone {
			settleOnceSwept(c, j, e.doneRecs[i])
		}
	}
}

// runMarked runs next, whose start the start log holds, while rec
// commits; it returns next's done records, as run does, and whether the
// commit succeeded. A failed commit stops dispatch (the persistence
// failure) and holds the ends it carried; the job runs on, and a
// restart before the store recovers ends it as interrupted by its slot.
func runMarked(s dispatcher, c *card, next *job, pre *launchPrep, rec endsCommit) ([]*job, []store.Job, bool) {
	recorded := make(chan struct{})
	s.mu.Lock()
	next.startCommitted = true
	next.startRecorded = recorded
	marked := next.rec.AttemptNo()
	s.mu.Unlock()
	var err error
	go func() {
		defer close(recorded)
		r := trace.StartRegion(context.Background(), "dispatch: commit a marked start")
		err = s.st.Commit(rec.cards, rec.recs...)
		r.End()
		s.mu.Lock()
		rec.landedLocked(s.core, err)
		s.mu.Unlock()
	}()
	waitSettled(&s.mu, s.cardsOf(next))
	done, doneRecs := s.run(c, next, pre)
	<-recorded
	s.mu.Lock()
	next.startRecorded = nil
	unrun := next.rec.State == store.StateQueued && next.rec.AttemptNo() == marked
	s.mu.Unlock()
	if unrun {
		// Stopped before its program ran, it is queued again: its slot
		// must not outlive that, or a restart would end it as started.
		if cerr := s.opt.Starts.MarkStart(c.id, "", 0); cerr != nil {
			s.log.Error("a job queued again before it ran is still marked started; a restart now would end it as interrupted",
				"job", next.rec.ID, "attempt", marked, "err", cerr)
			return done, doneRecs, false
		}
	}
	return done, doneRecs, err == nil
}
