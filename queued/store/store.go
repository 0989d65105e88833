// Package store keeps queued's durable state in one bbolt file: every job
// ever submitted (until retention deletes it), the FIFO order of the jobs
// still queued or running, a finish-time index for retention, and one record
// per card.
//
// Schema (version 1):
//
//	queue.db
//	├── meta/
//	│   ├── version   -> "1"                      (SchemaVersion, ASCII decimal)
//	│   └── probe     -> scratch bytes            (written and removed by Probe)
//	├── jobs/
//	│   └── <seq>     -> JSON Job                 (seq: 8-byte big-endian submission sequence; key order is FIFO order)
//	├── ids/
//	│   └── <id>      -> <seq>                    (id: 32 lowercase hex; written once at insert; sorted for prefix search)
//	├── finished/
//	│   └── <ns><seq> -> <id>                     (ns: 8-byte big-endian finish time in Unix ns; oldest first, for retention)
//	└── cards/
//	    └── <card>    -> JSON Card                (card: ASCII decimal card number)
//
// Beside queue.db, held.spill is a reserve of SpillBytes that keeps, while
// writes to queue.db fail, the records the daemon could not write but has
// already answered with; the next Open writes them in (see SpillFile).
//
// Records are keyed by sequence rather than id so that the two records a
// busy card writes per job (one job's end, the next one's start) sit side
// by side in one leaf page: the commit on the card's critical path touches
// as few pages as possible. Queued and running jobs are found at start by
// one scan of jobs/ (bounded by retention), so no index of them has to be
// rewritten on every transition.
//
// Every write goes through one commit loop that folds the requests waiting
// at that moment into a single bbolt transaction (one fsync), so concurrent
// submitters share commits instead of queueing behind each other's fsync,
// and no request waits for a timer as bbolt's own DB.Batch does.
package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// SchemaVersion is the layout this package reads and writes; a store with
// any other version is refused rather than guessed at.
const SchemaVersion = 1

// FileName is the bbolt file inside the state directory.
const FileName = "queue.db"

// Bucket and key names; see the schema tree above.
var (
	// BucketMeta holds store-wide keys.
	BucketMeta = []byte("meta")
	// KeyVersion holds SchemaVersion as ASCII decimal.
	KeyVersion = []byte("version")
	// KeyProbe is scratch space for Probe.
	KeyProbe = []byte("probe")
	// BucketJobs maps a big-endian sequence number to a JSON Job record;
	// cursor order is submission (FIFO) order.
	BucketJobs = []byte("jobs")
	// BucketIDs maps a job id to its sequence number.
	BucketIDs = []byte("ids")
	// BucketFinished indexes finished jobs by finish time for retention.
	BucketFinished = []byte("finished")
	// BucketCards maps a card number to its JSON Card record.
	BucketCards = []byte("cards")
)

var allBuckets = [][]byte{BucketMeta, BucketJobs, BucketIDs, BucketFinished, BucketCards}

// Errors callers classify with errors.Is.
var (
	// ErrNotFound means no job has that id.
	ErrNotFound = errors.New("not found")
	// ErrClosed means the store was closed before the request ran.
	ErrClosed = errors.New("store closed")
	// ErrLocked means another process holds the bbolt file lock.
	ErrLocked = errors.New("store locked")
	// ErrVersion means the file has a schema version this build cannot read.
	ErrVersion = errors.New("unknown store schema version")
)

// probeBytes is the size of the value Probe writes: larger than a page, so
// it needs fresh contiguous pages, as real writes do once the file is full.
const probeBytes = 64 << 10

// maxBatch bounds how many requests one commit carries.
const maxBatch = 256

// initialMmapSize is the file size the store grows to in one step when it
// first needs room, about what the default retention (10,000 finished
// jobs) fills. Growing bbolt's way, doubling from 32 KiB, costs a
// truncate, a full fsync and a remap at each step, inside a commit that
// every submission in flight waits for, and a remap must also wait for
// every open read; a fresh daemon took five such steps in its first 1,000
// jobs. The file is sparse: unwritten pages take no disk space.
const initialMmapSize = 16 << 20

// Options tune Open.
type Options struct {
	// LockTimeout is how long Open waits for the file lock; 0 means 2s.
	LockTimeout time.Duration
}

// Store is the bbolt file plus its commit loop. It is safe for concurrent use.
type Store struct {
	db   *bolt.DB
	dir  string
	reqs chan *request
	mu   sync.RWMutex // guards closed against sends on reqs
	// closed is set under mu before reqs is closed.
	closed   bool
	loopDone chan struct{}
	spillMu  sync.Mutex // guards spill's writes
	spill    *spill
	commits  atomic.Uint64
	writes   atomic.Uint64
}

type request struct {
	fn   func(*bolt.Tx) error
	done chan error
}

// Open opens or creates the store in dir (created 0700 when missing),
// checks its schema version and starts the commit loop.
func Open(dir string, opts Options) (*Store, error) {
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = 2 * time.Second
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating state directory: %w", err)
	}
	path := filepath.Join(dir, FileName)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: opts.LockTimeout, InitialMmapSize: initialMmapSize})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("opening %s: no lock after %s; is another queued using %s? %w", path, opts.LockTimeout, dir, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if err := db.Update(initSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	s := &Store{db: db, dir: dir, reqs: make(chan *request, 1024), loopDone: make(chan struct{})}
	go s.loop()
	if err := s.openSpill(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// initSchema creates the buckets of a new file or checks the version of an
// existing one.
func initSchema(tx *bolt.Tx) error {
	meta := tx.Bucket(BucketMeta)
	if meta == nil {
		found := false
		_ = tx.ForEach(func([]byte, *bolt.Bucket) error { found = true; return nil })
		if found {
			return fmt.Errorf("file has buckets but no meta/version: not a queued store: %w", ErrVersion)
		}
		for _, b := range allBuckets {
			if _, err := tx.CreateBucket(b); err != nil {
				return fmt.Errorf("creating bucket %s: %w", b, err)
			}
		}
		return tx.Bucket(BucketMeta).Put(KeyVersion, []byte(strconv.Itoa(SchemaVersion)))
	}
	raw := meta.Get(KeyVersion)
	v, err := strconv.Atoi(string(raw))
	if err != nil || v != SchemaVersion {
		return fmt.Errorf("schema version %q, this queued reads only version %d; move the directory aside or use the queued that wrote it: %w",
			raw, SchemaVersion, ErrVersion)
	}
	for _, b := range allBuckets {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return fmt.Errorf("creating bucket %s: %w", b, err)
		}
	}
	return nil
}

// Dir is the state directory the store lives in.
func (s *Store) Dir() string { return s.dir }

// Close stops the commit loop after the requests already sent have run,
// then closes the file. A second Close is a no-op.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.reqs)
	s.mu.Unlock()
	<-s.loopDone
	s.spillMu.Lock()
	if s.spill != nil {
		s.spill.f.Close()
		s.spill = nil
	}
	s.spillMu.Unlock()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("closing store: %w", err)
	}
	return nil
}

// Stats counts work done, so tests and benchmarks can see commits being shared.
type Stats struct {
	// Commits is the number of write transactions committed or attempted.
	Commits uint64
	// Writes is the number of write requests served.
	Writes uint64
}

// Stats returns the counters since Open.
func (s *Store) Stats() Stats {
	return Stats{Commits: s.commits.Load(), Writes: s.writes.Load()}
}

// update runs fn in a write transaction shared with whatever other requests
// are waiting, and returns once that transaction is durable (or failed).
func (s *Store) update(fn func(*bolt.Tx) error) error {
	r := &request{fn: fn, done: make(chan error, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	s.reqs <- r
	s.mu.RUnlock()
	return <-r.done
}

// loop is the group commit: it takes every request waiting at the moment,
// runs them in one transaction and answers them all after the fsync. If the
// shared transaction fails, each request is retried alone so one bad
// request cannot fail its neighbours (an I/O error fails them all again).
func (s *Store) loop() {
	defer close(s.loopDone)
	batch := make([]*request, 0, maxBatch)
	for r := range s.reqs {
		batch = append(batch[:0], r)
	drain:
		for len(batch) < maxBatch {
			select {
			case r, ok := <-s.reqs:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		err := s.commit(batch)
		if err != nil && len(batch) > 1 {
			for _, r := range batch {
				r.done <- s.commit([]*request{r})
			}
			continue
		}
		for _, r := range batch {
			r.done <- err
		}
	}
}

func (s *Store) commit(batch []*request) error {
	s.commits.Add(1)
	s.writes.Add(uint64(len(batch)))
	return s.db.Update(func(tx *bolt.Tx) error {
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
	vals := make([][]byte, len(jobs))
	for i := range jobs {
		if !ValidID(jobs[i].ID) {
			return fmt.Errorf("putting job %q: malformed id", jobs[i].ID)
		}
		v, err := json.Marshal(jobs[i])
		if err != nil {
			return fmt.Errorf("encoding job %s: %w", jobs[i].ID, err)
		}
		vals[i] = v
	}
	cardVals, err := encodeCards(cards)
	if err != nil {
		return err
	}
	err = s.update(func(tx *bolt.Tx) error {
		for i := range jobs {
			if err := putJob(tx, &jobs[i], vals[i]); err != nil {
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

func putJob(tx *bolt.Tx, j *Job, val []byte) error {
	id, seq := []byte(j.ID), seqKey(j.Seq)
	ids := tx.Bucket(BucketIDs)
	switch old := ids.Get(id); {
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
	if j.State == StateDone {
		if err := tx.Bucket(BucketFinished).Put(finishedKey(j.FinishedAt, j.Seq), id); err != nil {
			return fmt.Errorf("indexing job %s: %w", j.ID, err)
		}
	}
	return nil
}

// Job reads one job record; ErrNotFound when there is none.
func (s *Store) Job(id string) (Job, error) {
	var j Job
	err := s.db.View(func(tx *bolt.Tx) error {
		seq := tx.Bucket(BucketIDs).Get([]byte(id))
		if seq == nil {
			return ErrNotFound
		}
		v := tx.Bucket(BucketJobs).Get(seq)
		if v == nil {
			return ErrNotFound
		}
		return decodeJob(v, &j) // json.Unmarshal copies out of the mmap
	})
	if err != nil {
		return Job{}, fmt.Errorf("reading job %s: %w", id, err)
	}
	return j, nil
}

// Match returns up to max ids that start with prefix, in id order; callers
// ask for 2 to tell a unique prefix from an ambiguous one.
func (s *Store) Match(prefix string, max int) ([]string, error) {
	var ids []string
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(BucketIDs).Cursor()
		p := []byte(prefix)
		for k, _ := c.Seek(p); k != nil && len(ids) < max && hasPrefix(k, p); k, _ = c.Next() {
			ids = append(ids, string(k)) // string() copies the key
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("matching job id prefix %q: %w", prefix, err)
	}
	return ids, nil
}

func hasPrefix(k, p []byte) bool {
	return len(k) >= len(p) && string(k[:len(p)]) == string(p)
}

// Active returns the queued and running jobs in submission (FIFO) order,
// by one scan of every record; retention bounds how many there are.
func (s *Store) Active() ([]Job, error) {
	var jobs []Job
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(BucketJobs).ForEach(func(k, v []byte) error {
			var j Job
			if err := decodeJob(v, &j); err != nil {
				return fmt.Errorf("job at sequence %d: %w", binary.BigEndian.Uint64(k), err)
			}
			if j.State != StateDone {
				jobs = append(jobs, j)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading active jobs: %w", err)
	}
	return jobs, nil
}

// LastSeq is the highest sequence number stored, 0 for an empty store; new
// jobs continue after it.
func (s *Store) LastSeq() (uint64, error) {
	var seq uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(BucketJobs).Cursor().Last(); k != nil {
			seq = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("reading last sequence: %w", err)
	}
	return seq, nil
}

// Finished returns the ids of finished jobs, oldest first; retention and
// tests use it.
func (s *Store) Finished() ([]string, error) {
	var ids []string
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(BucketFinished).ForEach(func(_, id []byte) error {
			ids = append(ids, string(id))
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading finished index: %w", err)
	}
	return ids, nil
}

// Recent returns up to max finished jobs, newest first (by finish time),
// by a backward walk of the finished index: the scheduler seeds its
// run-time estimates with them at start, so they survive a restart.
func (s *Store) Recent(max int) ([]Job, error) {
	return s.RecentMatching(max, 0, nil)
}

// RecentMatching returns up to max finished jobs for which keep holds
// (every one when keep is nil), newest first, looking at no more than scan
// records (0: no bound), so a filter that matches little cannot make one
// request walk the whole history.
func (s *Store) RecentMatching(max, scan int, keep func(*Job) bool) ([]Job, error) {
	var jobs []Job
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(BucketJobs)
		c := tx.Bucket(BucketFinished).Cursor()
		seen := 0
		for k, _ := c.Last(); k != nil && len(jobs) < max && (scan <= 0 || seen < scan); k, _ = c.Prev() {
			v := b.Get(k[8:])
			if v == nil {
				continue // an index entry whose record is gone; Prune removes both
			}
			seen++
			var j Job
			if err := decodeJob(v, &j); err != nil {
				return fmt.Errorf("job at sequence %d: %w", binary.BigEndian.Uint64(k[8:]), err)
			}
			if keep == nil || keep(&j) {
				jobs = append(jobs, j)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading recent finished jobs: %w", err)
	}
	return jobs, nil
}

// Prune deletes finished jobs that finished before cutoff, and the oldest
// ones beyond the newest keep, and returns their ids so the caller can
// delete their output files. Work is split into transactions of at most
// 1000 deletions.
func (s *Store) Prune(cutoff time.Time, keep int) ([]string, error) {
	var all []string
	for {
		var ids []string
		err := s.update(func(tx *bolt.Tx) error {
			ids = ids[:0]
			fin := tx.Bucket(BucketFinished)
			n := fin.Stats().KeyN
			var keys [][]byte
			c := fin.Cursor()
			for k, _ := c.First(); k != nil && len(keys) < 1000; k, _ = c.Next() {
				if n-len(keys) <= keep && int64(binary.BigEndian.Uint64(k[:8])) >= cutoff.UnixNano() {
					break
				}
				keys = append(keys, append([]byte(nil), k...))
			}
			jobs, idx := tx.Bucket(BucketJobs), tx.Bucket(BucketIDs)
			for _, k := range keys {
				id := append([]byte(nil), fin.Get(k)...)
				if err := jobs.Delete(k[8:]); err != nil {
					return fmt.Errorf("deleting job %s: %w", id, err)
				}
				if err := idx.Delete(id); err != nil {
					return fmt.Errorf("unindexing job %s: %w", id, err)
				}
				ids = append(ids, string(id))
				if err := fin.Delete(k); err != nil {
					return fmt.Errorf("deleting index entry: %w", err)
				}
			}
			return nil
		})
		if err != nil {
			return all, fmt.Errorf("pruning finished jobs: %w", err)
		}
		all = append(all, ids...)
		if len(ids) < 1000 {
			return all, nil
		}
	}
}

// Probe proves that a write needing fresh pages commits now: it writes a
// 64 KiB scratch value and removes it again, in two transactions. The
// scheduler probes before it resumes after a persistence failure.
func (s *Store) Probe() error {
	scratch := make([]byte, probeBytes)
	if err := s.update(func(tx *bolt.Tx) error {
		return tx.Bucket(BucketMeta).Put(KeyProbe, scratch)
	}); err != nil {
		return fmt.Errorf("probing store: %w", err)
	}
	if err := s.update(func(tx *bolt.Tx) error {
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

// Cards returns every card record, in key order.
func (s *Store) Cards() ([]Card, error) {
	var cards []Card
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(BucketCards).ForEach(func(k, v []byte) error {
			var c Card
			if err := json.Unmarshal(v, &c); err != nil {
				return fmt.Errorf("card %s: %w", k, err)
			}
			cards = append(cards, c)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading cards: %w", err)
	}
	return cards, nil
}

func decodeJob(v []byte, j *Job) error {
	if err := json.Unmarshal(v, j); err != nil {
		return fmt.Errorf("decoding job record: %w", err)
	}
	return nil
}

func seqKey(seq uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, seq)
	return k
}

func finishedKey(t time.Time, seq uint64) []byte {
	k := make([]byte, 16)
	ns := t.UnixNano()
	if ns < 0 {
		ns = 0
	}
	binary.BigEndian.PutUint64(k, uint64(ns))
	binary.BigEndian.PutUint64(k[8:], seq)
	return k
}
