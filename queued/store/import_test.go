package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/store"
)

// TestImport_AllOrNothingAfterTheStoresOwn: imported jobs follow the
// stored ones; a card record the store has is kept; an id stored already
// refuses the whole import.
func TestImport_AllOrNothingAfterTheStoresOwn(t *testing.T) {
	t.Parallel()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	zero := 0
	job := func(id string) store.Job {
		return store.Job{ID: id, Kind: store.KindJob, Device: &zero, Cmd: "true", Cwd: "/", State: store.StateQueued, SubmittedAt: time.Now()}
	}
	mine := job(store.NewID())
	mine.Seq = 7
	if err := st.Commit([]store.Card{{ID: 0, State: store.CardHealthy, ResetEpoch: 9}}, mine); err != nil {
		t.Fatal(err)
	}
	a, b := job(store.NewID()), job(store.NewID())
	kept, err := st.ImportBatch(store.ImportBatch{Cards: []store.Card{{ID: 0, State: store.CardDead}, {ID: 1, State: store.CardDead, DeadReason: "old"}}, Add: []store.Job{a, b}})
	if err != nil || len(kept) != 1 || kept[0] != 0 {
		t.Fatalf("Import: kept %v, %v", kept, err)
	}
	active, _ := st.Active()
	if len(active) != 3 || active[0].ID != mine.ID || active[1].ID != a.ID || active[1].Seq != 8 || active[2].Seq != 9 {
		t.Fatalf("active after import: %+v", active)
	}
	cards, _ := st.Cards()
	if len(cards) != 2 || cards[0].State != store.CardHealthy || cards[0].ResetEpoch != 9 || cards[1].DeadReason != "old" {
		t.Fatalf("cards after import: %+v", cards)
	}
	c := job(store.NewID())
	if _, err := st.ImportBatch(store.ImportBatch{Add: []store.Job{c, a}}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("importing a stored id: %v", err)
	}
	if _, err := st.Job(c.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused import wrote %s: %v", c.ID, err)
	}
}

// TestImportBatch_ReplaceAndRecord: a batch replaces stored records in
// place (same sequence, the finish index moved with them) and stores the
// import record, all in one transaction; a record not stored with that
// sequence refuses the whole batch.
func TestImportBatch_ReplaceAndRecord(t *testing.T) {
	t.Parallel()
	s, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	zero := 0
	j := store.Job{ID: store.NewID(), Kind: store.KindJob, Device: &zero, Cmd: "x", Cwd: "/", State: store.StateQueued, SubmittedAt: time.Now()}
	if _, err := s.ImportBatch(store.ImportBatch{Add: []store.Job{j}}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Job(j.ID)
	code := 0
	got.State, got.ExitCode, got.FinishedAt, got.Outcome = store.StateDone, &code, time.Now(), store.OutcomeSuccess
	bad := got
	bad.Seq++
	if _, err := s.ImportBatch(store.ImportBatch{Replace: []store.Job{bad}, Record: []byte(`{"x":1}`)}); err == nil {
		t.Fatal("a replacement with another sequence was stored")
	}
	if rec, _ := s.ImportRecord(); rec != nil {
		t.Fatalf("a refused batch stored its record %q", rec)
	}
	if _, err := s.ImportBatch(store.ImportBatch{Replace: []store.Job{got}, Record: []byte(`{"x":2}`)}); err != nil {
		t.Fatal(err)
	}
	if after, _ := s.Job(j.ID); after.State != store.StateDone || after.Seq != got.Seq {
		t.Fatalf("replaced record %+v", after)
	}
	if fin, _ := s.Finished(); len(fin) != 1 || fin[0] != j.ID {
		t.Fatalf("finished index %v", fin)
	}
	if rec, _ := s.ImportRecord(); string(rec) != `{"x":2}` {
		t.Fatalf("import record %q", rec)
	}
}

// TestImportBatch_ReplaceNeverTakesOverAJob: an import's replacement of
// a stored record is refused, and nothing of its batch written, when the
// record is another user's (a submission of theirs, or their import) or
// was imported from another source; the same source may update its own
// user's record.
func TestImportBatch_ReplaceNeverTakesOverAJob(t *testing.T) {
	t.Parallel()
	s, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	zero, vera, mallory := 0, uint32(1001), uint32(1002)
	job := func(uid *uint32, source string) store.Job {
		return store.Job{ID: store.NewID(), Kind: store.KindJob, Device: &zero, Cmd: "x", Cwd: "/", State: store.StateQueued,
			SubmittedAt: time.Now(), OwnerUID: uid, Owner: "someone", ImportSource: source}
	}
	submitted, imported := job(&vera, ""), job(&vera, "/home/vera/jobs.sqlite3")
	if _, err := s.ImportBatch(store.ImportBatch{Add: []store.Job{submitted, imported}}); err != nil {
		t.Fatal(err)
	}
	over := func(j store.Job, uid *uint32, source string) store.Job {
		stored, err := s.Job(j.ID)
		if err != nil {
			t.Fatal(err)
		}
		stored.OwnerUID, stored.ImportSource, stored.Cmd = uid, source, "cat ~/loot"
		return stored
	}
	for _, tc := range []struct {
		name string
		j    store.Job
	}{
		{"another user's submission", over(submitted, &mallory, "/home/mallory/jobs.sqlite3")},
		{"another user's import, from their source", over(imported, &mallory, imported.ImportSource)},
		{"an import from another source", over(imported, &vera, "/tmp/jobs.sqlite3")},
		{"a user's job made no one's", over(imported, nil, imported.ImportSource)},
	} {
		_, err := s.ImportBatch(store.ImportBatch{Replace: []store.Job{tc.j}, Record: []byte(`{"x":1}`)})
		if !errors.Is(err, store.ErrNotImportable) {
			t.Errorf("%s: %v; want ErrNotImportable", tc.name, err)
		}
		if got, _ := s.Job(tc.j.ID); got.OwnerUID == nil || *got.OwnerUID != vera || got.Cmd != "x" {
			t.Errorf("%s: the record became %+v", tc.name, got)
		}
	}
	if rec, _ := s.ImportRecord(); rec != nil {
		t.Fatalf("a refused batch stored its record %q", rec)
	}
	same := over(imported, &vera, imported.ImportSource)
	same.State = store.StateDone
	if _, err := s.ImportBatch(store.ImportBatch{Replace: []store.Job{same}}); err != nil {
		t.Fatalf("the same source's update of its own user's record: %v", err)
	}
}
