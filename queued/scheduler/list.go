package scheduler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ttkit/ttkit/queued/store"
)

// ListScan bounds how many finished records one List looks at, so a filter
// that matches little costs no more than a page of history.
const ListScan = 20000

// listPage is how many finished records one read of the store gives a
// listing: each page is its own read, handed on before the next.
const listPage = 100

// ListFilter selects jobs for List. Zero fields select everything.
type ListFilter struct {
	// Card selects one card's jobs.
	Card *int
	// State selects queued, running or done jobs.
	State store.State
	// ClientID selects the jobs submitted under this client id.
	ClientID string
	// OwnerUID selects the jobs of this submitter.
	OwnerUID *uint32
	// Kind selects jobs, resets or holds; SlurmJobID the holds taken for
	// that Slurm job.
	Kind       store.Kind
	SlurmJobID string
	// ArrayID selects an array's elements: those whose array id starts
	// with it.
	ArrayID string
	// Active selects queued and running jobs only (no finished one is read
	// from the store).
	Active bool
	// Limit bounds the answer; at least 1.
	Limit int
	// Scan bounds how many finished records are looked at; 0 means
	// ListScan.
	Scan int
}

func (f *ListFilter) match(rec *store.Job) bool {
	return (f.Card == nil || slices.Contains(rec.Cards(), *f.Card)) &&
		(f.State == "" || rec.State == f.State) &&
		(f.ClientID == "" || rec.ClientID == f.ClientID) &&
		(f.OwnerUID == nil || (rec.OwnerUID != nil && *rec.OwnerUID == *f.OwnerUID)) &&
		(f.Kind == "" || rec.Kind == f.Kind) && (f.SlurmJobID == "" || rec.SlurmJobID == f.SlurmJobID) &&
		(f.ArrayID == "" || strings.HasPrefix(rec.ArrayID, f.ArrayID)) &&
		(!f.Active || rec.State != store.StateDone)
}

// list returns the jobs f selects (see each) in one slice.
func (s jobIndex) list(f ListFilter) ([]JobInfo, error) {
	var out []JobInfo
	err := s.each(f, func(info JobInfo) error {
		out = append(out, info)
		return nil
	})
	return out, err
}

// each calls fn with the jobs f selects, brief, up to f.Limit in all: the
// active ones first, card by card (the running job, then the queue in
// order, resets included), from one snapshot of memory; then the finished
// ones, newest first, read from the store a page (listPage) at a time and
// handed to fn before the next page is read, so an answer can be written
// as it is read and costs a page of memory, not a thousand records. An
// error of fn stops the listing and is returned.
func (s jobIndex) each(f ListFilter, fn func(JobInfo) error) error {
	if f.Limit < 1 {
		return fmt.Errorf("list limit %d: want at least 1", f.Limit)
	}
	var active []JobInfo
	s.mu.Lock()
	listed := map[*job]bool{} // a job of several cards is in several queues
	for _, id := range s.order {
		c := s.cards[id]
		queue := c.queue
		if c.current != nil {
			queue = append([]*job{c.current}, c.queue...)
		}
		for _, j := range queue {
			if len(active) < f.Limit && !listed[j] && j.durable && j.rec.State != store.StateDone && f.match(&j.rec) {
				listed[j] = true
				active = append(active, s.infoLocked(j))
			}
		}
	}
	// Finished jobs still in memory (held, or settling) come from memory;
	// the store may not have them yet. So does a job whose run has ended
	// and whose end is committing or being swept (settleOnceSwept): it is
	// on no card any more, and memory still holds it running.
	inMemory := map[string]bool{}
	for id, j := range s.jobs {
		if j.rec.State == store.StateDone || j.durable && !listed[j] && j.rec.State == store.StateRunning {
			inMemory[id] = true
			if len(active) < f.Limit && f.match(&j.rec) {
				active = append(active, s.infoLocked(j))
			}
		}
	}
	s.mu.Unlock()
	for _, info := range active {
		if err := fn(info); err != nil {
			return err
		}
	}
	left := f.Limit - len(active)
	if left <= 0 || f.Active || (f.State != "" && f.State != store.StateDone) {
		return nil
	}
	scan := f.Scan
	if scan <= 0 {
		scan = ListScan
	}
	keep := func(rec *store.Job) bool { return !inMemory[rec.ID] && f.match(rec) }
	var after []byte
	for left > 0 && scan > 0 {
		recs, next, scanned, err := s.st.FinishedPage(after, min(left, listPage), scan, keep)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			if err := fn(JobInfo{Job: rec}); err != nil {
				return err
			}
		}
		left, scan = left-len(recs), scan-scanned
		if next == nil {
			return nil
		}
		after = next
	}
	return nil
}
