package scheduler

import (
	"fmt"
	"slices"

	"github.com/ttkit/ttkit/queued/store"
)

// ListScan bounds how many finished records one List looks at, so a filter
// that matches little costs no more than a page of history.
const ListScan = 20000

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
		(!f.Active || rec.State != store.StateDone)
}

// list returns the jobs f selects: the active ones first, card by card
// (the running job, then the queue in order, resets included), then the
// finished ones, newest first, up to f.Limit in all.
func (s jobIndex) list(f ListFilter) ([]JobInfo, error) {
	if f.Limit < 1 {
		return nil, fmt.Errorf("list limit %d: want at least 1", f.Limit)
	}
	var out []JobInfo
	s.mu.Lock()
	listed := map[*job]bool{} // a job of several cards is in several queues
	for _, id := range s.order {
		c := s.cards[id]
		active := c.queue
		if c.current != nil {
			active = append([]*job{c.current}, c.queue...)
		}
		for _, j := range active {
			if len(out) < f.Limit && !listed[j] && j.durable && j.rec.State != store.StateDone && f.match(&j.rec) {
				listed[j] = true
				out = append(out, s.infoLocked(j))
			}
		}
	}
	// Finished jobs still in memory (held, or settling) come from memory;
	// the store may not have them yet.
	inMemory := map[string]bool{}
	for id, j := range s.jobs {
		if j.rec.State == store.StateDone {
			inMemory[id] = true
			if len(out) < f.Limit && f.match(&j.rec) {
				out = append(out, s.infoLocked(j))
			}
		}
	}
	s.mu.Unlock()
	if len(out) >= f.Limit || f.Active || (f.State != "" && f.State != store.StateDone) {
		return out, nil
	}
	scan := f.Scan
	if scan <= 0 {
		scan = ListScan
	}
	recs, err := s.st.RecentMatching(f.Limit-len(out), scan, func(rec *store.Job) bool {
		return !inMemory[rec.ID] && f.match(rec)
	})
	if err != nil {
		return out, err
	}
	for _, rec := range recs {
		out = append(out, JobInfo{Job: rec})
	}
	return out, nil
}
