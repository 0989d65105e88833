package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bigJob is a job whose command and environment are 100 KiB each.
func bigJob(seq uint64, state State) Job {
	j := job(seq, state)
	j.Cmd = "echo " + strings.Repeat("c", 100<<10)
	j.Env = map[string]string{"BIG": strings.Repeat("e", 100<<10), "PATH": "/usr/bin"}
	j.EnvFromShell = []string{"PATH"}
	if state == StateDone {
		j.FinishedAt = time.Unix(2000+int64(seq), 0)
	}
	return j
}

// TestStore_ListsReadNoSpec: what the daemon reads at start and for lists
// (the active queue, the newest finished jobs) is the record without its
// spec: a bounded preview of the command, the sizes, no environment. One
// job's record (Job) is whole.
func TestStore_ListsReadNoSpec(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	q, d := bigJob(1, StateQueued), bigJob(2, StateDone)
	if err := s.Put(q, d); err != nil {
		t.Fatal(err)
	}
	active, err := s.Active()
	if err != nil || len(active) != 1 {
		t.Fatalf("Active = %d records, %v", len(active), err)
	}
	recent, err := s.Recent(10)
	if err != nil || len(recent) != 1 {
		t.Fatalf("Recent = %d records, %v", len(recent), err)
	}
	for _, got := range []Job{active[0], recent[0]} {
		if len(got.Cmd) > 1024 || got.Env != nil || got.EnvFromShell != nil {
			t.Errorf("a listed record holds %d bytes of command and %d variables; want a preview and none", len(got.Cmd), len(got.Env))
		}
		if !strings.HasPrefix(q.Cmd, got.Cmd) || got.CmdBytes != len(q.Cmd) || got.EnvVars != 2 || got.EnvBytes != len("BIG=")+100<<10+1+len("PATH=/usr/bin")+1 {
			t.Errorf("a listed record does not say what it leaves out: cmd %d of %d bytes, env %d vars %d bytes", len(got.Cmd), got.CmdBytes, got.EnvVars, got.EnvBytes)
		}
		if got.CmdDigest() != q.CmdDigest() {
			t.Errorf("a listed record's command digest differs from the whole command's")
		}
	}
	for _, want := range []Job{q, d} {
		got, err := s.Job(want.ID)
		if err != nil || got.Cmd != want.Cmd || got.Env["BIG"] != want.Env["BIG"] || len(got.EnvFromShell) != 1 || got.Brief {
			t.Fatalf("Job(%s): %d bytes of command, %d variables, %v", want.ID[:8], len(got.Cmd), len(got.Env), err)
		}
	}
	// A record written again from its brief form (a transition) keeps the
	// spec.
	b := active[0]
	b.State = StateRunning
	if err := s.Put(b); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Job(q.ID); err != nil || got.Cmd != q.Cmd || got.State != StateRunning || len(got.Env) != 2 {
		t.Fatalf("after a brief write: %d bytes of command, %d variables, state %s, %v", len(got.Cmd), len(got.Env), got.State, err)
	}
	// Retention deletes the spec with the record.
	if ids, err := s.Prune(Retention{Cutoff: time.Unix(1<<40, 0)}); err != nil || len(ids) != 1 {
		t.Fatalf("Prune = %v, %v", ids, err)
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		if n := tx.Bucket(BucketSpecs).Stats().BucketN; n != 2 { // the bucket itself and the queued job's
			t.Errorf("%d spec buckets after the prune, want the queued job's alone", n-1)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestStore_BriefInsertIsRefused: a job's first record must carry its
// spec, or nothing could ever run it.
func TestStore_BriefInsertIsRefused(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	j := bigJob(1, StateQueued).Briefed()
	if err := s.Put(j); err == nil {
		t.Fatal("a brief record was stored as a new job")
	}
}

// TestFinishedPage_PagesNewestFirst: the finished jobs come a page at a
// time, newest first, each page starting where the last ended, also when
// the record it ended on has been deleted since.
func TestFinishedPage_PagesNewestFirst(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	var all []Job
	for i := range 7 {
		all = append(all, job(uint64(i+1), StateDone))
		all[i].FinishedAt = time.Unix(3000+int64(i), 0)
	}
	if err := s.Put(all...); err != nil {
		t.Fatal(err)
	}
	var got []string
	var after []byte
	for page := 0; ; page++ {
		jobs, next, _, err := s.FinishedPage(after, 3, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			got = append(got, j.ID)
		}
		if next == nil {
			break
		}
		if page == 0 {
			// The last record of this page goes before the next is read.
			if _, err := s.Prune(Retention{Cutoff: all[4].FinishedAt.Add(time.Nanosecond)}); err != nil {
				t.Fatal(err)
			}
		}
		after = next
	}
	want := []string{all[6].ID, all[5].ID, all[4].ID}
	if len(got) != 3 || strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("pages = %v, want the newest three and then nothing (the rest was pruned)", got)
	}
}

// TestOpen_MigratesVersion1AfterABackup: a store of version 1 (whole
// records in jobs/) is copied beside itself first, then rewritten in one
// transaction: the records brief, their specs apart; every job reads as
// before.
func TestOpen_MigratesVersion1AfterABackup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	q, d := bigJob(1, StateQueued), bigJob(2, StateDone)
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range []string{"meta", "jobs", "ids", "finished", "cards"} {
			if _, err := tx.CreateBucket([]byte(name)); err != nil {
				return err
			}
		}
		tx.Bucket(BucketMeta).Put(KeyVersion, []byte("1"))
		for _, j := range []Job{q, d} {
			v, _ := json.Marshal(j)
			tx.Bucket(BucketJobs).Put(seqKey(j.Seq), v)
			tx.Bucket(BucketIDs).Put([]byte(j.ID), seqKey(j.Seq))
		}
		return tx.Bucket(BucketFinished).Put(finishedKey(d.FinishedAt, d.Seq), []byte(d.ID))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	v1, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, dir)
	backups, _ := filepath.Glob(filepath.Join(dir, FileName+".v1-*.bak"))
	if len(backups) != 1 {
		t.Fatalf("backups of the version 1 store: %v", backups)
	}
	if b, err := os.ReadFile(backups[0]); err != nil || !bytes.Equal(b[:4096], v1[:4096]) {
		t.Fatalf("the backup does not start as the version 1 file: %v", err)
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		if v := string(tx.Bucket(BucketMeta).Get(KeyVersion)); v != strconv.Itoa(SchemaVersion) {
			t.Errorf("version after the migration %q", v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []Job{q, d} {
		got, err := s.Job(want.ID)
		if err != nil || got.Cmd != want.Cmd || got.Env["BIG"] != want.Env["BIG"] || got.State != want.State {
			t.Fatalf("Job(%s) after the migration: %d bytes, %v", want.ID[:8], len(got.Cmd), err)
		}
	}
	active, err := s.Active()
	if err != nil || len(active) != 1 || len(active[0].Cmd) > 1024 || active[0].Env != nil {
		t.Fatalf("Active after the migration: %d, %v", len(active), err)
	}
	s.Close()
	// Opened again, nothing more happens.
	s2 := open(t, dir)
	if backups, _ := filepath.Glob(filepath.Join(dir, FileName+".v1-*.bak")); len(backups) != 1 {
		t.Fatalf("backups after a second open: %v", backups)
	}
	if got, err := s2.Job(q.ID); err != nil || got.Cmd != q.Cmd {
		t.Fatalf("Job after a second open: %v", err)
	}
}

// TestCommit_KeepsNoRecordAfterwards: once a write has committed, the
// store holds nothing of it in memory: the commit's batch used to
// keep its last requests, encoded records and all (a spec may be 256
// KiB), until later batches overwrote them. Not parallel: it measures
// the process's heap.
func TestCommit_KeepsNoRecordAfterwards(t *testing.T) {
	s := open(t, t.TempDir())
	before := heapAfterGC()
	// Eight writers at once, so one commit carries several records.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			j := bigJob(uint64(i+1), StateQueued)
			j.Env["MORE"] = strings.Repeat("m", 800<<10) // a MiB in all
			if err := s.Put(j); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// One record may still be on its way out (the race detector keeps
	// the last one a little longer); the batch kept every one of its own.
	grown := heapAfterGC() - before
	for deadline := time.Now().Add(2 * time.Second); grown > 4<<20 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		grown = heapAfterGC() - before
	}
	if grown > 4<<20 {
		t.Fatalf("the heap grew by %d KiB over the writes; want the records gone", grown>>10)
	}
}

// heapAfterGC is the heap's live bytes after a collection.
func heapAfterGC() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestRelease_RecordsReadAgain: releasing the map's pages loses nothing:
// every record and spec reads the same afterwards, also while reads run.
func TestRelease_RecordsReadAgain(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	j := bigJob(1, StateDone)
	if err := s.Put(j); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 50 {
			if got, err := s.Job(j.ID); err != nil || got.Cmd != j.Cmd || got.Env["BIG"] != j.Env["BIG"] {
				t.Errorf("Job while releasing: %v", err)
				return
			}
		}
	}()
	for range 50 {
		if err := s.Release(); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	if got, err := s.Recent(1); err != nil || len(got) != 1 || got[0].ID != j.ID {
		t.Fatalf("Recent after Release: %v", err)
	}
}

// TestStore_SpecReadsWhatAJobRuns: Spec, a start's read, gives the whole
// command and environment from specs/, large or small, or from a record
// that carries its own; a brief record with nothing behind it is
// ErrNoSpec, never its preview, and an unknown id ErrNotFound.
func TestStore_SpecReadsWhatAJobRuns(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	small := job(1, StateQueued)
	small.Env = map[string]string{"PATH": "/usr/bin"}
	big := bigJob(2, StateQueued)
	if err := s.Put(small, big); err != nil {
		t.Fatal(err)
	}
	for _, want := range []Job{small, big} {
		sp, err := s.Spec(want.ID)
		if err != nil || sp.Cmd != want.Cmd || len(sp.Env) != len(want.Env) || sp.Env["PATH"] != "/usr/bin" || len(sp.EnvFromShell) != len(want.EnvFromShell) {
			t.Fatalf("Spec(%s) = %d bytes of command, %d variables, %v", want.ID[:8], len(sp.Cmd), len(sp.Env), err)
		}
	}
	// A record that carries its own spec, and one brief with none.
	own, cut := bigJob(3, StateQueued), bigJob(4, StateQueued).Briefed()
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for _, j := range []Job{own, cut} {
			v, err := json.Marshal(j)
			if err != nil {
				return err
			}
			if err := tx.Bucket(BucketJobs).Put(seqKey(j.Seq), v); err != nil {
				return err
			}
			if err := tx.Bucket(BucketIDs).Put([]byte(j.ID), seqKey(j.Seq)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if sp, err := s.Spec(own.ID); err != nil || sp.Cmd != own.Cmd || sp.Env["BIG"] != own.Env["BIG"] {
		t.Fatalf("Spec of a record carrying its own = %d bytes of command, %d variables, %v", len(sp.Cmd), len(sp.Env), err)
	}
	if sp, err := s.Spec(cut.ID); !errors.Is(err, ErrNoSpec) || sp.Cmd != "" {
		t.Fatalf("Spec of a brief record with no spec = %d bytes of command, %v; want ErrNoSpec", len(sp.Cmd), err)
	}
	if _, err := s.Spec("no-such-job"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no-such-job") {
		t.Fatalf("Spec of an unknown id = %v; want ErrNotFound naming it", err)
	}
}
