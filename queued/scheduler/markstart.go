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
// job (a reset or a hold commits its start), of one card, and the job the
// slot names last has a durable record (not markPending).
func markable(log StartLog, next *job, markPending bool) bool {
	return log != nil && next != nil && !markPending && next.rec.Kind == store.KindJob && !next.spans()
}

// markAndPrepare marks the start of rec (next's record as taken) in
// card's slot and prepares the start meanwhile; with an error from the
// start log, the caller commits the start instead and uses the same
// preparation.
func (s starter) markAndPrepare(card int, rec *store.Job) (*launchPrep, error) {
	prepared := make(chan *launchPrep, 1)
	go func() {
		defer trace.StartRegion(context.Background(), "dispatch: prepare the start").End()
		prepared <- s.prepare(*rec)
	}()
	r := trace.StartRegion(context.Background(), "dispatch: mark the start")
	err := s.opt.Starts.MarkStart(card, rec.ID, rec.AttemptNo())
	r.End()
	return <-prepared, err
}

// startRecord is the commit a marked start makes while its job runs.
type startRecord struct {
	done     []*job // the ends it carries
	doneRecs []store.Job
	cards    []store.Card
	revs     []uint64
	recs     []store.Job // doneRecs and the running record
}

// runMarked runs next, whose start the start log holds, while rec
// commits; it returns next's done records, as run does, and whether the
// commit succeeded. A failed commit stops dispatch (the persistence
// failure) and holds the ends it carried; the job runs on, and a
// restart before the store recovers ends it as interrupted by its slot.
func runMarked(s dispatcher, c *card, next *job, pre *launchPrep, rec startRecord) ([]*job, []store.Job, bool) {
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
		defer s.mu.Unlock()
		if err != nil {
			s.persist.failLocked(err)
			for i, j := range rec.done {
				s.persist.holdLocked(j, rec.doneRecs[i])
			}
			return
		}
		s.savedLocked(rec.cards, rec.revs)
		for i, j := range rec.done {
			if rec.doneRecs[i].State == store.StateDone {
				settleOnceSwept(s.core, j, rec.doneRecs[i])
			}
		}
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
