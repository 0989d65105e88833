package scheduler

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/ttkit/ttkit/queued/store"
)

// Fair shares. On a shared daemon every job has an owner (the submitter's
// uid, from the kernel), and no owner may take more than a share of what
// all of them share: Options.MaxQueuedPerUser of the queue, and
// Options.MaxOutputBytesPerUser of the kept output (outputbudget.go).
// Owners Options.Exempt accepts (the admins) are held only to the totals.
// The order in which jobs run does not change: each card stays FIFO,
// whoever submitted what.

// OwnerCount is how many queued jobs one owner has.
type OwnerCount struct {
	UID   uint32
	Name  string
	Count int
}

func (o OwnerCount) String() string { return fmt.Sprintf("%s (uid %d) %d", o.Name, o.UID, o.Count) }

// QueueFullError refuses a submission (or a hold) because the queue is
// full: the submitter's share of it (PerUser) or the whole of it. It is
// ErrQueueFull for errors.Is, and says whose jobs fill the queue.
type QueueFullError struct {
	// PerUser says the submitter has Count jobs queued and Limit is
	// Options.MaxQueuedPerUser; otherwise Count jobs are queued over all
	// cards and Limit is Options.MaxQueued.
	PerUser bool
	// UID and Owner are the submitter's.
	UID   uint32
	Owner string
	Count int
	Limit int
	// Top lists the owners with the most queued jobs, most first (at
	// most maxTopOwners), when the whole queue is full.
	Top []OwnerCount
	// Unowned counts the queued jobs without an owner, when the whole
	// queue is full.
	Unowned int
	// Adding is how many jobs the refused submission would have queued
	// when more than one (an array, all or none).
	Adding int
}

// maxTopOwners bounds the owners a full queue's refusal names.
const maxTopOwners = 5

func (e *QueueFullError) Error() string {
	adding := ""
	if e.Adding > 1 {
		adding = fmt.Sprintf(", and an array of %d adds to them all or none", e.Adding)
	}
	if e.PerUser {
		return fmt.Sprintf("%s (uid %d) has %d jobs queued; one user may have %d%s", e.Owner, e.UID, e.Count, e.Limit, adding)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d jobs queued%s", e.Count, adding)
	parts := make([]string, 0, len(e.Top)+1)
	for _, o := range e.Top {
		parts = append(parts, o.String())
	}
	if e.Unowned > 0 && len(e.Top) > 0 { // a user-mode daemon's jobs have no owner: all are its user's
		parts = append(parts, fmt.Sprintf("without an owner %d", e.Unowned))
	}
	if len(parts) > 0 {
		b.WriteString(": " + strings.Join(parts, ", "))
	}
	return b.String()
}

// Is makes a QueueFullError ErrQueueFull.
func (e *QueueFullError) Is(target error) bool { return target == ErrQueueFull }

// eachQueuedLocked calls fn once for every queued job and hold (a job of
// several cards is in several queues; resets are left out).
func (s *core) eachQueuedLocked(fn func(j *job)) {
	for _, id := range s.order {
		for _, j := range s.cards[id].queue {
			if j.rec.Kind != store.KindReset && j.rec.Card() == id {
				fn(j)
			}
		}
	}
}

// queuedOfLocked counts the queued jobs of owner uid.
func (s *core) queuedOfLocked(uid uint32) int {
	n := 0
	s.eachQueuedLocked(func(j *job) {
		if j.rec.OwnerUID != nil && *j.rec.OwnerUID == uid {
			n++
		}
	})
	return n
}

// fullLocked is the refusal of a full queue: whose jobs fill it.
func (s *core) fullLocked(rec *store.Job) *QueueFullError {
	e := &QueueFullError{Count: s.queued, Limit: s.opt.MaxQueued, Owner: rec.Owner}
	if rec.OwnerUID != nil {
		e.UID = *rec.OwnerUID
	}
	by := map[uint32]*OwnerCount{}
	s.eachQueuedLocked(func(j *job) {
		if j.rec.OwnerUID == nil {
			e.Unowned++
			return
		}
		o := by[*j.rec.OwnerUID]
		if o == nil {
			o = &OwnerCount{UID: *j.rec.OwnerUID, Name: j.rec.Owner}
			by[o.UID] = o
		}
		o.Count++
	})
	for _, o := range by {
		e.Top = append(e.Top, *o)
	}
	slices.SortFunc(e.Top, func(a, b OwnerCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.UID, b.UID))
	})
	if len(e.Top) > maxTopOwners {
		e.Top = e.Top[:maxTopOwners]
	}
	return e
}
