package store

// Group commits and the writes that go through them.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// groupCommit commits write requests in groups: every request waiting
// when a transaction begins goes into it, and all are answered after its
// fsync. If the shared transaction fails, each request is retried alone
// so one bad request cannot fail its neighbours (an I/O error fails them
// all again). It is safe for concurrent use.
//
// There is no commit goroutine: the caller that finds no commit in
// progress commits itself (it leads), and when its transaction is done it
// hands the lead to the first request that came meanwhile. A lone commit
// (a card's worker between two jobs, the usual case) so costs no wake of
// another goroutine on the way in nor on the way out: on our 2-vCPU
// machines the two wakes of a commit goroutine were a third of a
// commit's time (issue 41).
type groupCommit struct {
	db      *bolt.DB
	mu      sync.Mutex
	pending []*request // waiting for the next transaction, in order
	leading bool       // a caller commits; it or its heir takes pending
	closed  bool
	idle    sync.Cond // broadcast when leading ends
	commits atomic.Uint64
	writes  atomic.Uint64
}

type request struct {
	fn func(*bolt.Tx) error
	// done receives the transaction's error, or errLead: the request is
	// first of pending and its caller commits next.
	done chan error
}

// errLead hands the lead to a waiting request's caller.
var errLead = errors.New("lead the next commit")

// newGroupCommit commits on db.
func newGroupCommit(db *bolt.DB) *groupCommit {
	g := &groupCommit{db: db}
	g.idle.L = &g.mu
	return g
}

// update runs fn in a write transaction shared with whatever other requests
// are waiting, and returns once that transaction is durable (or failed).
func (g *groupCommit) update(fn func(*bolt.Tx) error) error {
	r := &request{fn: fn, done: make(chan error, 1)}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return ErrClosed
	}
	g.pending = append(g.pending, r)
	if g.leading {
		g.mu.Unlock()
		if err := <-r.done; err != errLead {
			return err
		}
		g.mu.Lock() // r is first of pending, and this caller leads
	}
	g.leading = true
	// Without a lead before, pending was empty; handed it, r is first:
	// either way r is in this batch.
	n := min(len(g.pending), maxBatch)
	batch := g.pending[:n:n]
	g.pending = append([]*request(nil), g.pending[n:]...)
	g.mu.Unlock()

	g.run(batch)

	g.mu.Lock()
	if len(g.pending) > 0 {
		g.pending[0].done <- errLead
	} else {
		g.leading = false
		g.idle.Broadcast()
	}
	g.mu.Unlock()
	return <-r.done
}

// pendingLen is the number of requests waiting for a transaction.
func (g *groupCommit) pendingLen() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.pending)
}

// close refuses requests from now on, waits for those already made to
// be committed, and reports whether this call closed; a second close is
// a no-op.
func (g *groupCommit) close() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.closed = true
	for g.leading {
		g.idle.Wait()
	}
	return true
}

// run commits batch and answers each of its requests.
func (g *groupCommit) run(batch []*request) {
	err := g.commit(batch)
	if err != nil && len(batch) > 1 {
		for _, r := range batch {
			r.done <- g.commit([]*request{r})
		}
		return
	}
	for _, r := range batch {
		r.done <- err
	}
}

func (g *groupCommit) commit(batch []*request) error {
	g.commits.Add(1)
	g.writes.Add(uint64(len(batch)))
	return g.db.Update(func(tx *bolt.Tx) error {
		for _, r := range batch {
			if err := r.fn(tx); err != nil {
				return err
			}
		}
		return nil
	})
}

// Put durably writes job records in one transaction, keeping the indexes in
// step: the id index gets an entry the first time a job is written, and a
// done job is indexed in finished/ by FinishedAt. A record may not change
// its sequence number.
func (s *Store) Put(jobs ...Job) error {
	return s.Commit(nil, jobs...)
}

// Commit durably writes card and job records in one transaction, so a
// card's state and the jobs it decides (a failed reset, the card marked
// dead, its queued jobs failed) can never be seen half written. Job
// records are indexed as Put describes.
func (s *Store) Commit(cards []Card, jobs ...Job) error {
	if len(jobs) == 0 && len(cards) == 0 {
		return nil
	}
	vals, specs := make([][]byte, len(jobs)), make([][]byte, len(jobs))
	for i := range jobs {
		if !ValidID(jobs[i].ID) {
			return fmt.Errorf("putting job %q: malformed id", jobs[i].ID)
		}
		v, spec, err := encodeJob(&jobs[i])
		if err != nil {
			return err
		}
		vals[i], specs[i] = v, spec
	}
	cardVals, err := encodeCards(cards)
	if err != nil {
		return err
	}
	err = s.gc.update(func(tx *bolt.Tx) error {
		for i := range jobs {
			if err := putJob(tx, &jobs[i], vals[i], specs[i]); err != nil {
				return err
			}
		}
		return putCards(tx, cards, cardVals)
	})
	if err != nil {
		return fmt.Errorf("writing %d job and %d card record(s): %w", len(jobs), len(cards), err)
	}
	return nil
}

// encodeJob encodes j as jobs/ keeps it (brief) and, unless j is brief,
// its spec.
func encodeJob(j *Job) (val, spec []byte, err error) {
	if !j.Brief {
		if spec, err = json.Marshal(j.Spec()); err != nil {
			return nil, nil, fmt.Errorf("encoding the spec of job %s: %w", j.ID, err)
		}
	}
	if val, err = json.Marshal(j.Briefed()); err != nil {
		return nil, nil, fmt.Errorf("encoding job %s: %w", j.ID, err)
	}
	return val, spec, nil
}

// putJob writes one encoded record (see encodeJob) and its indexes, and
// its spec when the job has none stored yet. A job's first record must
// come with its spec.
func putJob(tx *bolt.Tx, j *Job, val, spec []byte) error {
	id, seq := []byte(j.ID), seqKey(j.Seq)
	ids := tx.Bucket(BucketIDs)
	old := ids.Get(id)
	isNew := old == nil
	switch {
	case old == nil && spec == nil:
		return fmt.Errorf("job %s: a new job's first record must carry its command and environment, not a brief record", j.ID)
	case old == nil:
		if err := ids.Put(id, seq); err != nil {
			return fmt.Errorf("indexing job %s: %w", j.ID, err)
		}
	case string(old) != string(seq):
		return fmt.Errorf("job %s: sequence %d differs from the stored %d", j.ID, j.Seq, binary.BigEndian.Uint64(old))
	}
	if err := tx.Bucket(BucketJobs).Put(seq, val); err != nil {
		return fmt.Errorf("putting job %s: %w", j.ID, err)
	}
	if spec != nil {
		if err := putSpec(tx, j.ID, seq, spec, isNew); err != nil {
			return err
		}
	}
	if j.State == StateDone {
		if err := tx.Bucket(BucketFinished).Put(finishedKey(j.FinishedAt, j.Seq), id); err != nil {
			return fmt.Errorf("indexing job %s: %w", j.ID, err)
		}
	}
	return nil
}

// Probe proves that a write needing fresh pages commits now: it writes a
// 64 KiB scratch value and removes it again, in two transactions. The
// scheduler probes before it resumes after a persistence failure.
func (s *Store) Probe() error {
	scratch := make([]byte, probeBytes)
	if err := s.gc.update(func(tx *bolt.Tx) error {
		return tx.Bucket(BucketMeta).Put(KeyProbe, scratch)
	}); err != nil {
		return fmt.Errorf("probing store: %w", err)
	}
	if err := s.gc.update(func(tx *bolt.Tx) error {
		return tx.Bucket(BucketMeta).Delete(KeyProbe)
	}); err != nil {
		return fmt.Errorf("probing store: %w", err)
	}
	return nil
}

// PutCards durably writes card records in one transaction.
func (s *Store) PutCards(cards ...Card) error {
	return s.Commit(cards)
}

func encodeCards(cards []Card) ([][]byte, error) {
	vals := make([][]byte, len(cards))
	for i := range cards {
		v, err := json.Marshal(cards[i])
		if err != nil {
			return nil, fmt.Errorf("encoding card %d: %w", cards[i].ID, err)
		}
		vals[i] = v
	}
	return vals, nil
}

func putCards(tx *bolt.Tx, cards []Card, vals [][]byte) error {
	b := tx.Bucket(BucketCards)
	for i := range cards {
		if err := b.Put([]byte(strconv.Itoa(cards[i].ID)), vals[i]); err != nil {
			return fmt.Errorf("putting card %d: %w", cards[i].ID, err)
		}
	}
	return nil
}
