package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"
)

// ErrExists means a job id given to Import is already stored: those
// records were imported before.
var ErrExists = errors.New("job id already stored")

// Import durably adds records brought over from another tool, all in one
// transaction or none: the jobs get sequence numbers after the last stored
// one, in the order given (so queued jobs keep their order behind the
// store's own), and a card record is written only where the store has none
// yet, since the store's own is newer. It refuses the whole lot with
// ErrExists when any job id is already stored, so the same import cannot
// happen twice. It returns the ids of the cards whose records it kept.
func (s *Store) Import(cards []Card, jobs []Job) (kept []int, err error) {
	cardVals, err := encodeCards(cards)
	if err != nil {
		return nil, err
	}
	err = s.update(func(tx *bolt.Tx) error {
		kept = kept[:0]
		ids := tx.Bucket(BucketIDs)
		var last uint64
		if k, _ := tx.Bucket(BucketJobs).Cursor().Last(); k != nil {
			last = binary.BigEndian.Uint64(k)
		}
		for i := range jobs {
			j := jobs[i]
			if !ValidID(j.ID) {
				return fmt.Errorf("importing job %q: malformed id", j.ID)
			}
			if ids.Get([]byte(j.ID)) != nil {
				return fmt.Errorf("importing job %s: %w", j.ID, ErrExists)
			}
			j.Seq = last + 1 + uint64(i)
			v, err := json.Marshal(j)
			if err != nil {
				return fmt.Errorf("encoding job %s: %w", j.ID, err)
			}
			if err := putJob(tx, &j, v); err != nil {
				return err
			}
		}
		b := tx.Bucket(BucketCards)
		for i, c := range cards {
			if b.Get([]byte(strconv.Itoa(c.ID))) != nil {
				kept = append(kept, c.ID)
				continue
			}
			if err := putCards(tx, cards[i:i+1], cardVals[i:i+1]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("importing %d job and %d card record(s): %w", len(jobs), len(cards), err)
	}
	return kept, nil
}
