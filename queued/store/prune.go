package store

// Retention: deleting old finished jobs.

import (
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Prune deletes finished jobs that finished before cutoff, and the oldest
// ones beyond the newest keep, and returns their ids so the caller can
// delete their output files. Work is split into transactions of at most
// 1000 deletions.
func (s *Store) Prune(cutoff time.Time, keep int) ([]string, error) {
	var all []string
	for {
		var ids []string
		err := s.gc.update(func(tx *bolt.Tx) error {
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
				if err := deleteSpec(tx, k[8:]); err != nil {
					return fmt.Errorf("deleting the spec of job %s: %w", id, err)
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
