// Package store keeps queued's durable state in one bbolt file: every job
// ever submitted (until retention deletes it), the FIFO order of the jobs
// still queued or running, a finish-time index for retention, and one record
// per card.
//
// Schema (version 2):
//
//	queue.db
//	├── meta/
//	│   ├── version   -> "2"                      (SchemaVersion, ASCII decimal)
//	│   ├── probe     -> scratch bytes            (written and removed by Probe)
//	│   └── imports   -> JSON                     (what imports of the Python tool's database brought in; KeyImports)
//	├── jobs/
//	│   └── <seq>     -> JSON Job, brief          (seq: 8-byte big-endian submission sequence; key order is FIFO order;
//	│                                              the command cut to PreviewBytes, no environment: see spec.go)
//	├── specs/                                    (each job's whole command and environment; written once, with the job)
//	│   ├── <seq>     -> JSON Spec                (a spec of at most 16 KiB)
//	│   └── <seq>/                                (a larger one: a bucket of its own, so it shares no page with another)
//	│       └── spec  -> JSON Spec
//	├── ids/
//	│   └── <id>      -> <seq>                    (id: 32 lowercase hex; written once at insert; sorted for prefix search)
//	├── finished/
//	│   └── <ns><seq> -> <id>                     (ns: 8-byte big-endian finish time in Unix ns; oldest first, for retention)
//	└── cards/
//	    └── <card>    -> JSON Card                (card: ASCII decimal card number)
//
// Version 1 kept each job's whole command and environment in its record
// under jobs/, so everything that read records (the queues at start, every
// list) read them too. Open upgrades such a store: it copies the file to
// queue.db.v1-<time>.bak first, then moves every spec into specs/ in one
// transaction (see migrate.go).
//
// Beside queue.db, starts is the start log (StartLog, opened on its
// own): a slot per card naming the last job whose start was made durable
// there, with one fdatasync, rather than in queue.db (see StartsFile).
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
// Every write goes through a group commit that folds the requests waiting
// at that moment into a single bbolt transaction (one fsync), so concurrent
// submitters share commits instead of queueing behind each other's fsync,
// and no request waits for a timer as bbolt's own DB.Batch does. The
// caller that finds no commit in progress runs it itself (commit.go).
package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// SchemaVersion is the layout this package reads and writes; a store with
// any other version is refused rather than guessed at.
const SchemaVersion = 2

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

var allBuckets = [][]byte{BucketMeta, BucketJobs, BucketSpecs, BucketIDs, BucketFinished, BucketCards}

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
	// ErrNoSpec means a job's record is brief (its command cut or its
	// environment left out) and no spec holds the rest: it must fail
	// rather than run a preview.
	ErrNoSpec = errors.New("its whole command and environment are not in the store")
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

// Store is the bbolt file plus its group commit. It is safe for concurrent use.
type Store struct {
	db      *bolt.DB
	dir     string
	gc      *groupCommit
	spillMu sync.Mutex // guards spill's writes
	spill   *spill
}

// Open opens or creates the store in dir (created 0700 when missing),
// checks its schema version and sets up its group commit.
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
	if err := upgrade(db, path); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if err := db.Update(initSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	s := &Store{db: db, dir: dir, gc: newGroupCommit(db)}
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

// Close refuses writes from now on, waits for those already made to
// commit, then closes the file. A second Close is a no-op.
func (s *Store) Close() error {
	if !s.gc.close() {
		return nil
	}
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
	return Stats{Commits: s.gc.commits.Load(), Writes: s.gc.writes.Load()}
}
