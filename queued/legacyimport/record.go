package legacyimport

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// merge is the batch that brings c into st: jobs it has not got are
// added (queued ones after the store's own, in c's order); jobs an
// earlier import stored and queued has not touched since are replaced
// when the database says something new of them (with their sequence
// number: a queued job keeps its place); jobs queued ran are kept as
// queued recorded them; and a job prev queued that is gone from the store
// (it ran on queued and retention deleted it) is not brought back.
func merge(st *store.Store, c *converted, prev sourceRecord) (store.ImportBatch, error) {
	b := store.ImportBatch{Cards: c.cards}
	for _, j := range c.jobs {
		old, err := st.Job(j.ID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			if slices.Contains(prev.Queued, j.ID) {
				c.report.Unchanged++
				continue
			}
			b.Add = append(b.Add, j)
		case err != nil:
			return b, err
		case !replaceable(old) || same(old, j):
			c.report.Unchanged++
		default:
			j.Seq = old.Seq
			b.Replace = append(b.Replace, j)
			c.report.Updated++
		}
	}
	return b, nil
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
