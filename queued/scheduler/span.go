package scheduler

import (
	"fmt"
	"strings"

	"github.com/ttkit/ttkit/queued/store"
)

// Jobs that span cards. A job (or a hold) of several cards takes its
// place at the tail of every one of their queues and starts when it is at
// the head of all of them and all are free, on all at once: each card's
// queue stays strictly FIFO, and a card whose head is such a job waits
// for it, idle, until the others are done with what is ahead of it there.
// Every queue is ordered by submission (resets aside, which go first and
// end by themselves), so the oldest queued job is at the head of each of
// its queues and can always start once they are free: no job waits for
// another in a cycle.

// cardSet is the cards of one job, ascending.
type cardSet []*card

// cardsOf is j's cards; a card no longer configured is left out.
func (s *core) cardsOf(j *job) cardSet {
	ids := j.rec.Cards()
	set := make(cardSet, 0, len(ids))
	for _, id := range ids {
		if c := s.cards[id]; c != nil {
			set = append(set, c)
		}
	}
	return set
}

// push appends j to the tail of every queue.
func (cs cardSet) push(j *job) {
	for _, c := range cs {
		c.push(j)
	}
}

// remove takes j out of every queue it is in; false if it was in none.
func (cs cardSet) remove(j *job) bool {
	found := false
	for _, c := range cs {
		if c.remove(j) {
			found = true
		}
	}
	return found
}

// putBack returns j, taken but never started, to the head of every queue
// (behind a pending reset).
func (cs cardSet) putBack(j *job) {
	for _, c := range cs {
		c.putBack(j)
	}
}

// reinsert returns j to its FIFO place in every queue.
func (cs cardSet) reinsert(j *job) {
	for _, c := range cs {
		c.reinsert(j)
	}
}

// wakeup wakes every card's worker.
func (cs cardSet) wakeup() {
	for _, c := range cs {
		c.wakeup()
	}
}

// anyDead is the first dead card of the set, or nil.
func (cs cardSet) anyDead() *card {
	for _, c := range cs {
		if c.dead != nil {
			return c
		}
	}
	return nil
}

// ids lists the set's card numbers.
func (cs cardSet) ids() []int {
	out := make([]int, len(cs))
	for i, c := range cs {
		out[i] = c.id
	}
	return out
}

// readyFor reports whether head, a job or hold at the head of card c's
// queue, may start now on every one of its cards, and if not, why (for
// status: which card it waits for). c itself has been checked.
func (cs cardSet) readyFor(head *job, c *card) (bool, string) {
	var busy []string
	for _, o := range cs {
		if o == c {
			continue
		}
		switch {
		case o.dead != nil:
			return false, fmt.Sprintf("card %d is dead", o.id)
		case gatedJob(head) && o.unfit != "":
			return false, fmt.Sprintf("card %d is unfit (%s)", o.id, o.unfit)
		case o.current != nil:
			busy = append(busy, fmt.Sprintf("card %d (running %s)", o.id, short(o.current.rec.ID)))
		case o.head() != head:
			busy = append(busy, fmt.Sprintf("card %d (its queue is ahead)", o.id))
		}
	}
	if len(busy) > 0 {
		return false, "job " + short(head.rec.ID) + " takes cards " + setText(cs) + " at once; waiting for " + strings.Join(busy, ", ")
	}
	return true, ""
}

// short is the first 8 characters of an id, for messages.
func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// setText is a set's cards as a comma list.
func setText(cs cardSet) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprint(c.id)
	}
	return strings.Join(parts, ",")
}

// spans reports whether j takes several cards.
func (j *job) spans() bool { return j.rec.Spans() }

// isWork reports whether j is a job or a hold (not a reset): what a dead
// or paused card does not start.
func (j *job) isWork() bool { return j.rec.Kind != store.KindReset }

// cardsByID is the set of the cards named by ids, in all (the core's
// cards, which never change after New: no lock is needed).
func cardsByID(all map[int]*card, ids []int) cardSet {
	set := make(cardSet, 0, len(ids))
	for _, id := range ids {
		if c := all[id]; c != nil {
			set = append(set, c)
		}
	}
	return set
}
