package legacyimport

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/ttkit/ttkit/queued/store"
)

// importRecord is what the store's meta/imports holds: per database
// imported (by path), what was read and which jobs it queued.
type importRecord struct {
	Sources map[string]sourceRecord `json:"sources"`
}

// sourceRecord is one database's last import.
type sourceRecord struct {
	// Fingerprint is the version read last.
	Fingerprint fingerprint `json:"fingerprint"`
	ImportedAt  time.Time   `json:"imported_at"`
	// Queued are the ids of the jobs any import of it stored as queued:
	// one that is no longer in the store ran on queued and was deleted by
	// retention since, and is never imported again.
	Queued []string `json:"queued,omitempty"`
	// Renamed maps a job of the database (its renameKey) to the fresh
	// id it got because the id it would have had was another record's;
	// a later import of the source finds the job by it.
	Renamed map[string]string `json:"renamed,omitempty"`
}

// readRecord reads the import record of the store in dir without
// keeping the store open; an empty record when there is no store. A
// store a queued holds is read by the caller's later open (which then
// fails with store.ErrLocked).
func readRecord(dir string) (importRecord, error) {
	if _, err := os.Stat(filepath.Join(dir, store.FileName)); errors.Is(err, os.ErrNotExist) {
		return importRecord{}, nil
	}
	st, err := store.Open(dir, store.Options{LockTimeout: 500 * time.Millisecond})
	if errors.Is(err, store.ErrLocked) {
		return importRecord{}, fmt.Errorf("a queued is using %s: stop queued (systemctl --user stop queued), import, then start it again: %w", dir, err)
	}
	if err != nil {
		return importRecord{}, err
	}
	defer st.Close()
	return loadRecord(st)
}

func loadRecord(st *store.Store) (importRecord, error) {
	var r importRecord
	raw, err := st.ImportRecord()
	if err != nil || raw == nil {
		return r, err
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, fmt.Errorf("reading the import record of %s: %w", st.Dir(), err)
	}
	return r, nil
}

// replaceable reports whether a stored record of an imported job may be
// replaced by what the database says now: queued has not touched it
// since the import (still queued, never started; or imported as
// interrupted), so the database's word is the newer.
func replaceable(j store.Job) bool {
	return (j.State == store.StateQueued && j.StartedAt.IsZero()) ||
		(j.Outcome == store.OutcomeInterrupted && j.Error == interruptedError)
}

// merge is the batch that brings c, read from source, into st, and the
// jobs as stored (their final ids). Every job carries its source. Jobs
// it has not got are added (queued ones after the store's own, in c's
// order); jobs this source imported before and queued has not touched
// since are replaced when the database says something new of them (with
// their sequence number: a queued job keeps its place); jobs queued ran
// are kept as queued recorded them; and a job prev queued that is gone
// from the store (it ran on queued and retention deleted it) is not
// brought back.
//
// A row never takes over a record this source did not import (see
// fromSource), nor one an earlier row of the batch took: whose id it
// carries is another job's, queued's own or another import's, and the
// row is added under a fresh id, kept in prev's
// Renamed so that the next import of the source finds it again. A row
// whose record this source imported for another user (the file changed
// hands) is refused, named in the report: an import never changes an
// owner.
func merge(st *store.Store, c *converted, source string, prev sourceRecord, seen bool) (store.ImportBatch, []store.Job, error) {
	b := store.ImportBatch{Cards: slices.Clone(c.cards)}
	// What an earlier merge of c (into a store that then lost the race
	// to be the directory's) decided does not count.
	c.renamed, c.report.TakenIDs, c.report.Refused = map[string]string{}, nil, nil
	final := make([]store.Job, 0, len(c.jobs))
	taken := map[string]bool{}
	for _, j := range c.jobs {
		j.ImportSource = source
		first, key := j.ID, renameKey(j) // the id the database gives it, and the job's name in Renamed
		if id, ok := prev.Renamed[key]; ok {
			j.ID = id
		}
		old, err := st.Job(j.ID)
		switch {
		case taken[j.ID]:
			// An earlier row has it (ids that differ only in case or
			// dashes map to one).
			if j.ID, err = freshID(st, taken); err != nil {
				return b, nil, err
			}
			c.moved(key, first, j, b.Cards)
		case errors.Is(err, store.ErrNotFound):
			if slices.Contains(prev.Queued, j.ID) {
				c.report.Unchanged++
				continue
			}
		case err != nil:
			return b, nil, err
		case !fromSource(old, source, seen):
			if j.ID, err = freshID(st, taken); err != nil {
				return b, nil, err
			}
			c.moved(key, first, j, b.Cards)
		case !sameOwner(old.OwnerUID, j.OwnerUID):
			c.refuse(j, fmt.Sprintf("job %s is %s's (uid %s) in the store, and the database now belongs to %s: an import never changes a job's owner",
				j.ID, old.Owner, uidText(old.OwnerUID), ownerName(j)))
			continue
		case !replaceable(old) || same(old, j):
			c.report.Unchanged++
			taken[j.ID] = true
			final = append(final, j)
			continue
		default:
			j.Seq = old.Seq
			b.Replace = append(b.Replace, j)
			taken[j.ID] = true
			final = append(final, j)
			c.report.Updated++
			continue
		}
		taken[j.ID] = true
		b.Add = append(b.Add, j)
		final = append(final, j)
	}
	return b, final, nil
}

// fromSource reports whether the stored record old is one an import of
// source made, which a later import of it may update. A record imported
// before imports recorded their source counts as the source's when the
// store has imported the source before (seen); the owner is checked
// apart.
func fromSource(old store.Job, source string, seen bool) bool {
	return old.ImportSource == source || (old.ImportSource == "" && seen)
}

// freshID is a new random job id that neither st nor taken has.
func freshID(st *store.Store, taken map[string]bool) (string, error) {
	for {
		id := store.NewID()
		if _, err := st.Job(id); errors.Is(err, store.ErrNotFound) && !taken[id] {
			return id, nil
		} else if err != nil && !errors.Is(err, store.ErrNotFound) {
			return "", err
		}
	}
}

// moved records that job j (key, its renameKey), which the database
// would have stored as first, got the id j.ID because first is another
// record's: in the report and in what the next import of the source
// reads (renamed), for its output file, and for the card whose last
// reset it was.
func (c *converted) moved(key, first string, j store.Job, cards []store.Card) {
	c.renamed[key] = j.ID
	if j.LegacyID != "" {
		if c.report.Renamed == nil {
			c.report.Renamed = map[string]string{}
		}
		c.report.Renamed[j.LegacyID] = j.ID
		c.report.TakenIDs = append(c.report.TakenIDs, j.LegacyID)
	}
	if out, ok := c.outputs[first]; ok {
		c.outputs[j.ID] = out
	}
	for i := range cards {
		if cards[i].LastResetID == first {
			cards[i].LastResetID = j.ID
		}
	}
}

// renameKey is what names j in a source's Renamed: its row's id, unique
// in its database; for a record the import made without a row of its
// own (a card's reset), the id it was made with, which depends only on
// the card's state.
func renameKey(j store.Job) string {
	if j.LegacyID != "" {
		return "row " + j.LegacyID
	}
	return "made " + j.ID
}

// refuse leaves job j out of the import, saying why in the report.
func (c *converted) refuse(j store.Job, why string) {
	if c.report.Refused == nil {
		c.report.Refused = map[string]string{}
	}
	id := j.LegacyID
	if id == "" {
		id = j.ID
	}
	c.report.Refused[id] = why
}

// sameOwner reports whether two records' owners are the same: the same
// uid, or none on both (user mode).
func sameOwner(a, b *uint32) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

func uidText(uid *uint32) string {
	if uid == nil {
		return "none"
	}
	return strconv.FormatUint(uint64(*uid), 10)
}

func ownerName(j store.Job) string {
	if j.Owner == "" {
		return "uid " + uidText(j.OwnerUID)
	}
	return j.Owner + " (uid " + uidText(j.OwnerUID) + ")"
}

// same reports whether an imported record says what the stored one does
// about the job's life.
func same(a, b store.Job) bool {
	return a.State == b.State && a.Outcome == b.Outcome && a.FinishedAt.Equal(b.FinishedAt) &&
		(a.ExitCode == nil) == (b.ExitCode == nil) && (a.ExitCode == nil || *a.ExitCode == *b.ExitCode)
}

// mergeIDs is a and the ids of b it lacks.
func mergeIDs(a, b []string) []string {
	out := slices.Clone(a)
	for _, id := range b {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}
