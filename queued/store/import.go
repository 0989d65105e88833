package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"
)

// ErrExists means a job id given to Import is already stored: those
// records were imported before.
var ErrExists = errors.New("job id already stored")

// ErrNotImportable refuses to write an imported record over a stored one
// that the same source did not import for the same owner: an import
// never takes over another job, nor gives a job to another user.
var ErrNotImportable = errors.New("not a record this import may update")

// KeyImports, in BucketMeta, holds what imports of another tool's
// database brought in (JSON written and read by legacyimport: each
// source's fingerprint and the ids it queued), so that a later start can
// tell a database that changed since from one already imported.
var KeyImports = []byte("imports")

// ImportBatch is one import's writes; see Store.ImportBatch.
type ImportBatch struct {
	// Cards are written where the store has no record of the card yet.
	Cards []Card
	// Add are new jobs: they get sequence numbers after the last stored
	// one, in this order; an id already stored refuses the batch
	// (ErrExists).
	Add []Job
	// Replace are stored jobs written again with the same sequence
	// number: an import that reads a database again updates the records
	// queued never ran (a queued job the other tool has run since). Each
	// must have been imported from the same source (ImportSource) and
	// keep its owner, or the batch is refused (ErrNotImportable).
	Replace []Job
	// Record, when not nil, is stored under meta/imports.
	Record []byte
}

// ImportBatch durably writes b, records brought over from another tool,
// in one transaction or not at all: new jobs get sequence numbers after
// the last stored one, in the order given (so queued jobs keep their
// order behind the store's own), and a card record is written only where
// the store has none yet, since the store's own is newer. A new job whose
// id is already stored refuses the whole batch with ErrExists, so the
// same import cannot happen twice. It returns the ids of the cards whose
// records it kept.
func (s *Store) ImportBatch(b ImportBatch) (kept []int, err error) {
	cardVals, err := encodeCards(b.Cards)
	if err != nil {
		return nil, err
	}
	err = s.gc.update(func(tx *bolt.Tx) error {
		kept = kept[:0]
		ids := tx.Bucket(BucketIDs)
		var last uint64
		if k, _ := tx.Bucket(BucketJobs).Cursor().Last(); k != nil {
			last = binary.BigEndian.Uint64(k)
		}
		for i := range b.Add {
			j := b.Add[i]
			if !ValidID(j.ID) {
				return fmt.Errorf("importing job %q: malformed id", j.ID)
			}
			if ids.Get([]byte(j.ID)) != nil {
				return fmt.Errorf("importing job %s: %w", j.ID, ErrExists)
			}
			j.Seq = last + 1 + uint64(i)
			if err := putEncoded(tx, &j); err != nil {
				return err
			}
		}
		for i := range b.Replace {
			j := b.Replace[i]
			seq := ids.Get([]byte(j.ID))
			if seq == nil || binary.BigEndian.Uint64(seq) != j.Seq {
				return fmt.Errorf("importing job %s again: not stored with sequence %d", j.ID, j.Seq)
			}
			if old := tx.Bucket(BucketJobs).Get(seq); old != nil {
				var prev Job
				if err := decodeBrief(old, &prev); err != nil {
					return fmt.Errorf("importing job %s again: %w", j.ID, err)
				}
				if err := mayReplace(prev, j); err != nil {
					return err
				}
				if prev.State == StateDone {
					// Its finish-time index entry moves with the record.
					if err := tx.Bucket(BucketFinished).Delete(finishedKey(prev.FinishedAt, prev.Seq)); err != nil {
						return fmt.Errorf("importing job %s again: %w", j.ID, err)
					}
				}
			}
			if err := putEncoded(tx, &j); err != nil {
				return err
			}
		}
		bc := tx.Bucket(BucketCards)
		for i, c := range b.Cards {
			if bc.Get([]byte(strconv.Itoa(c.ID))) != nil {
				kept = append(kept, c.ID)
				continue
			}
			if err := putCards(tx, b.Cards[i:i+1], cardVals[i:i+1]); err != nil {
				return err
			}
		}
		if b.Record != nil {
			if err := tx.Bucket(BucketMeta).Put(KeyImports, b.Record); err != nil {
				return fmt.Errorf("recording the import: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("importing %d new, %d updated job and %d card record(s): %w", len(b.Add), len(b.Replace), len(b.Cards), err)
	}
	return kept, nil
}

// mayReplace is nil when the imported record j may be written over the
// stored prev: prev came from the same source (a record stored before
// imports recorded their source may be updated by any import, as then)
// and both are the same user's.
func mayReplace(prev, j Job) error {
	switch {
	case prev.ImportSource != "" && prev.ImportSource != j.ImportSource:
		return fmt.Errorf("importing job %s again: it was imported from %s, not from %q: %w", j.ID, prev.ImportSource, j.ImportSource, ErrNotImportable)
	case !sameOwner(prev.OwnerUID, j.OwnerUID):
		return fmt.Errorf("importing job %s again: it is %s, the import would make it %s: %w", j.ID, ownerText(prev.OwnerUID), ownerText(j.OwnerUID), ErrNotImportable)
	}
	return nil
}

// sameOwner reports whether two records' owners are the same: the same
// uid, or none on both.
func sameOwner(a, b *uint32) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

func ownerText(uid *uint32) string {
	if uid == nil {
		return "no user's"
	}
	return "uid " + strconv.FormatUint(uint64(*uid), 10) + "'s"
}

func putEncoded(tx *bolt.Tx, j *Job) error {
	v, spec, err := encodeJob(j)
	if err != nil {
		return err
	}
	return putJob(tx, j, v, spec)
}

// ImportRecord is the value stored under meta/imports, nil when no import
// recorded one.
func (s *Store) ImportRecord() ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(BucketMeta).Get(KeyImports); v != nil {
			out = append([]byte(nil), v...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the import record: %w", err)
	}
	return out, nil
}
