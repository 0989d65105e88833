package store

// Retention: deleting old finished jobs.

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// pruneBatch bounds the deletions of one transaction.
const pruneBatch = 1000

// Retention says which finished jobs Prune deletes.
type Retention struct {
	// Cutoff: those that finished before it.
	Cutoff time.Time
	// Keep: the oldest beyond the newest Keep.
	Keep int
	// KeepPerOwner, when above 0: of each owner's, those beyond the
	// owner's newest KeepPerOwner, so on a shared daemon one user's
	// thousands of finished jobs push out their own oldest records, never
	// another user's (Keep takes the oldest of everyone's). Owners Exempt
	// accepts (the admins) and jobs with no owner are held only to Keep.
	KeepPerOwner int
	// Exempt is asked once about each owner over KeepPerOwner, outside
	// any transaction (it may read the user database); nil exempts none.
	Exempt func(uid uint32) bool
}

// Prune deletes the finished jobs r names and returns their ids, so the
// caller can delete their output files: first each owner's beyond their
// share, then by age and count, so the total takes the oldest of
// everyone's only once no one is over their share (a user's burst of
// jobs never costs another user's records). Work is split into
// transactions of at most pruneBatch deletions.
func (s *Store) Prune(r Retention) ([]string, error) {
	p := pruner{s.db, s.gc}
	var ids []string
	if r.KeepPerOwner > 0 {
		var err error
		if ids, err = p.owners(r.KeepPerOwner, r.Exempt); err != nil {
			return ids, err
		}
	}
	old, err := p.oldest(r.Cutoff, r.Keep)
	return append(ids, old...), err
}

// pruner is Prune's two passes over the store's finished jobs.
type pruner struct {
	db *bolt.DB
	gc *groupCommit
}

// oldest deletes finished jobs that finished before cutoff, and the
// oldest ones beyond the newest keep.
func (s pruner) oldest(cutoff time.Time, keep int) ([]string, error) {
	var all []string
	for {
		var ids []string
		err := s.gc.update(func(tx *bolt.Tx) error {
			fin := tx.Bucket(BucketFinished)
			n := fin.Stats().KeyN
			var keys [][]byte
			c := fin.Cursor()
			for k, _ := c.First(); k != nil && len(keys) < pruneBatch; k, _ = c.Next() {
				if n-len(keys) <= keep && int64(binary.BigEndian.Uint64(k[:8])) >= cutoff.UnixNano() {
					break
				}
				keys = append(keys, append([]byte(nil), k...))
			}
			var err error
			ids, err = deleteFinished(tx, keys)
			return err
		})
		if err != nil {
			return all, fmt.Errorf("pruning finished jobs: %w", err)
		}
		all = append(all, ids...)
		if len(ids) < pruneBatch {
			return all, nil
		}
	}
}

// owners deletes, of each owner's finished jobs, those beyond the
// owner's newest keep (Retention.KeepPerOwner), except exempt owners'
// (exempt may be nil), and returns their ids, oldest first. Each record's
// owner is read from its brief record (ownerOf): for 10,000 finished
// jobs, some tens of milliseconds, as often as retention runs.
func (s pruner) owners(keep int, exempt func(uid uint32) bool) ([]string, error) {
	type owned struct {
		uid uint32
		key []byte
	}
	var beyond []owned // finished index keys beyond their owner's keep, newest first
	err := s.db.View(func(tx *bolt.Tx) error {
		fin, jobs := tx.Bucket(BucketFinished), tx.Bucket(BucketJobs)
		seen := map[uint32]int{}
		c := fin.Cursor()
		for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
			uid, ok := ownerOf(jobs.Get(k[8:]))
			if !ok {
				continue
			}
			if seen[uid]++; seen[uid] > keep {
				beyond = append(beyond, owned{uid, append([]byte(nil), k...)})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the owners of finished jobs: %w", err)
	}
	isExempt := map[uint32]bool{}
	for _, o := range beyond {
		if _, asked := isExempt[o.uid]; !asked {
			isExempt[o.uid] = exempt != nil && exempt(o.uid)
		}
	}
	var keys [][]byte
	for _, o := range slices.Backward(beyond) { // oldest first, as the index orders them
		if !isExempt[o.uid] {
			keys = append(keys, o.key)
		}
	}
	var all []string
	for len(keys) > 0 {
		batch := keys[:min(len(keys), pruneBatch)]
		keys = keys[len(batch):]
		var ids []string
		err := s.gc.update(func(tx *bolt.Tx) error {
			var err error
			ids, err = deleteFinished(tx, batch)
			return err
		})
		if err != nil {
			return all, fmt.Errorf("pruning each owner's oldest finished jobs: %w", err)
		}
		all = append(all, ids...)
	}
	return all, nil
}

// deleteFinished deletes the finished jobs at keys of the finished index
// (finish time, then the job's key), with their specs and index entries,
// and returns their ids; a key no longer in the index (deleted since it
// was read) is skipped.
func deleteFinished(tx *bolt.Tx, keys [][]byte) ([]string, error) {
	fin, jobs, idx := tx.Bucket(BucketFinished), tx.Bucket(BucketJobs), tx.Bucket(BucketIDs)
	var ids []string
	for _, k := range keys {
		v := fin.Get(k)
		if v == nil {
			continue
		}
		id := append([]byte(nil), v...)
		if err := jobs.Delete(k[8:]); err != nil {
			return ids, fmt.Errorf("deleting job %s: %w", id, err)
		}
		if err := deleteSpec(tx, k[8:]); err != nil {
			return ids, fmt.Errorf("deleting the spec of job %s: %w", id, err)
		}
		if err := idx.Delete(id); err != nil {
			return ids, fmt.Errorf("unindexing job %s: %w", id, err)
		}
		ids = append(ids, string(id))
		if err := fin.Delete(k); err != nil {
			return ids, fmt.Errorf("deleting index entry: %w", err)
		}
	}
	return ids, nil
}
