package store

// The commit loop and the writes that go through it.

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// groupCommit is the commit loop: it takes every write request waiting at
// the moment, runs them in one transaction and answers them all after
// the fsync. If the shared transaction fails, each request is retried
// alone so one bad request cannot fail its neighbours (an I/O error fails
// them all again). It is safe for concurrent use.
type groupCommit struct {
	db   *bolt.DB
	reqs chan *request
	mu   sync.RWMutex // guards closed against sends on reqs
	// closed is set under mu before reqs is closed.
	closed  bool
	done    chan struct{} // closed when the loop has ended
	commits atomic.Uint64
	writes  atomic.Uint64
}

type request struct {
	fn   func(*bolt.Tx) error
	done chan error
}

// newGroupCommit starts the loop on db.
func newGroupCommit(db *bolt.DB) *groupCommit {
	g := &groupCommit{db: db, reqs: make(chan *request, 1024), done: make(chan struct{})}
	go g.loop()
	return g
}

// update runs fn in a write transaction shared with whatever other requests
// are waiting, and returns once that transaction is durable (or failed).
func (g *groupCommit) update(fn func(*bolt.Tx) error) error {
	r := &request{fn: fn, done: make(chan error, 1)}
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		return ErrClosed
	}
	g.reqs <- r
	g.mu.RUnlock()
	return <-r.done
}

// close stops the loop after the requests already sent have run and
// reports whether this call did; a second close is a no-op.
func (g *groupCommit) close() bool {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return false
	}
	g.closed = true
	close(g.reqs)
	g.mu.Unlock()
	<-g.done
	return true
}

func (g *groupCommit) loop() {
	defer close(g.done)
	batch := make([]*request, 0, maxBatch)
	for r := range g.reqs {
		batch = append(batch[:0], r)
	drain:
		for len(batch) < maxBatch {
			select {
			case r, ok := <-g.reqs:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		err := g.commit(batch)
		if err != nil && len(batch) > 1 {
			for _, r := range batch {
				r.done <- g.commit([]*request{r})
			}
		} else {
			for _, r := range batch {
				r.done <- err
			}
		}
		// The requests' records (a spec may be 256 KiB) must not live on
		// in the batch's array until later batches overwrite them.
		clear(batch)
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
