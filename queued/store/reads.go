package store

// Reads: one job, id prefixes, the active queue, finished jobs, cards.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Job reads one job's whole record, its spec included; ErrNotFound when
// there is none. With Spec, it is the one read that touches a spec: for
// GET /job and a resubmit (a job's start reads the spec alone).
func (s *Store) Job(id string) (j Job, err error) {
	err = s.db.View(func(tx *bolt.Tx) error { j, err = readJob(tx, id, true); return err })
	return j, err
}

// Brief reads one job's record without its spec (see Briefed);
// ErrNotFound when there is none.
func (s *Store) Brief(id string) (j Job, err error) {
	err = s.db.View(func(tx *bolt.Tx) error { j, err = readJob(tx, id, false); return err })
	return j, err
}

// Spec reads what job id runs, its spec, and nothing else of its
// record: a job's start needs only that, since the scheduler holds the
// brief record in memory, and decoding the record again was about 8% of
// a drain's CPU profile (issue 41). ErrNotFound when there is no such
// job; ErrNoSpec when its record is brief and nothing holds what it
// leaves out.
func (s *Store) Spec(id string) (sp Spec, err error) {
	err = s.db.View(func(tx *bolt.Tx) error { sp, err = specOf(tx, id); return err })
	return sp, err
}

// specOf reads the spec of job id in tx: from specs/, or from its record
// when that was written before specs were kept apart and carries its
// own.
func specOf(tx *bolt.Tx, id string) (Spec, error) {
	seq := tx.Bucket(BucketIDs).Get([]byte(id))
	if seq == nil {
		return Spec{}, fmt.Errorf("reading the spec of job %s: %w", id, ErrNotFound)
	}
	sp, ok, err := readSpec(tx, seq)
	switch {
	case err != nil:
		return Spec{}, fmt.Errorf("reading the spec of job %s: %w", id, err)
	case ok:
		return sp, nil
	}
	j, err := readJob(tx, id, false)
	switch {
	case err != nil:
		return Spec{}, err
	case j.CmdTruncated() || j.EnvVars > 0:
		return Spec{}, fmt.Errorf("reading the spec of job %s: %w", id, ErrNoSpec)
	}
	return j.Spec(), nil
}

// readJob reads job id's record in tx, whole (with its spec) or brief.
func readJob(tx *bolt.Tx, id string, whole bool) (Job, error) {
	var j Job
	seq := tx.Bucket(BucketIDs).Get([]byte(id))
	if seq == nil {
		return j, fmt.Errorf("reading job %s: %w", id, ErrNotFound)
	}
	v := tx.Bucket(BucketJobs).Get(seq)
	if v == nil {
		return j, fmt.Errorf("reading job %s: %w", id, ErrNotFound)
	}
	if err := decodeBrief(v, &j); err != nil { // json.Unmarshal copies out of the mmap
		return Job{}, fmt.Errorf("reading job %s: %w", id, err)
	}
	if !whole {
		return j, nil
	}
	sp, ok, err := readSpec(tx, seq)
	if err != nil {
		return Job{}, fmt.Errorf("reading job %s: %w", id, err)
	}
	if ok {
		j = j.WithSpec(sp)
	}
	return j, nil
}

// Owners returns the owner (OwnerUID) of each of ids that has one, from
// the brief records, in one read.
func (s *Store) Owners(ids []string) (map[string]uint32, error) {
	out := map[string]uint32{}
	err := s.db.View(func(tx *bolt.Tx) error {
		idx, jobs := tx.Bucket(BucketIDs), tx.Bucket(BucketJobs)
		for _, id := range ids {
			seq := idx.Get([]byte(id))
			if seq == nil {
				continue
			}
			if uid, ok := ownerOf(jobs.Get(seq)); ok {
				out[id] = uid
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the owners of %d jobs: %w", len(ids), err)
	}
	return out, nil
}

// ownerOf is the owner (OwnerUID) a stored record names; false for none,
// or a record that cannot be read.
func ownerOf(v []byte) (uint32, bool) {
	var j struct {
		OwnerUID *uint32 `json:"owner_uid"`
	}
	if v == nil || json.Unmarshal(v, &j) != nil || j.OwnerUID == nil {
		return 0, false
	}
	return *j.OwnerUID, true
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
// brief, by one scan of every record; retention bounds how many there
// are.
func (s *Store) Active() ([]Job, error) {
	var jobs []Job
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(BucketJobs).ForEach(func(k, v []byte) error {
			var j Job
			if err := decodeBrief(v, &j); err != nil {
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

// Recent returns up to max finished jobs, brief, newest first (by finish
// time), by a backward walk of the finished index: the scheduler seeds its
// run-time estimates with them at start, so they survive a restart.
func (s *Store) Recent(max int) ([]Job, error) {
	jobs, _, _, err := s.FinishedPage(nil, max, 0, nil)
	return jobs, err
}

// FinishedPage returns up to max finished jobs for which keep holds
// (every one when keep is nil), brief, newest first, starting after the
// position after (from the newest when nil) and looking at no more than
// scan records (0: no bound). next is the position to continue from (nil
// when the history is exhausted) and scanned how many records it looked
// at. Each page is its own read, so a long listing written to a slow
// client never holds a read open: a record deleted between two pages is
// simply not met.
func (s *Store) FinishedPage(after []byte, max, scan int, keep func(*Job) bool) (jobs []Job, next []byte, scanned int, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(BucketJobs)
		c := tx.Bucket(BucketFinished).Cursor()
		var k []byte
		if after == nil {
			k, _ = c.Last()
		} else {
			// The first key below after, whether after is still there or not.
			if k, _ = c.Seek(after); k == nil {
				k, _ = c.Last()
			}
			for k != nil && bytes.Compare(k, after) >= 0 {
				k, _ = c.Prev()
			}
		}
		for ; k != nil && len(jobs) < max && (scan <= 0 || scanned < scan); k, _ = c.Prev() {
			next = append(next[:0], k...)
			v := b.Get(k[8:])
			if v == nil {
				continue // an index entry whose record is gone; Prune removes both
			}
			scanned++
			var j Job
			if err := decodeBrief(v, &j); err != nil {
				return fmt.Errorf("job at sequence %d: %w", binary.BigEndian.Uint64(k[8:]), err)
			}
			if keep == nil || keep(&j) {
				jobs = append(jobs, j)
			}
		}
		if k == nil {
			next = nil // nothing older
		}
		return nil
	})
	if err != nil {
		return nil, nil, scanned, fmt.Errorf("reading recent finished jobs: %w", err)
	}
	return jobs, next, scanned, nil
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

// decodeBrief decodes a record of jobs/, which is brief.
func decodeBrief(v []byte, j *Job) error {
	if err := decodeJob(v, j); err != nil {
		return err
	}
	j.Brief = true
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
