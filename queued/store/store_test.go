package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func card(n int) *int { return &n }

func job(seq uint64, state State) Job {
	return Job{ID: NewID(), Seq: seq, Kind: KindJob, Device: card(0), Cmd: "true", Cwd: "/",
		State: state, SubmittedAt: time.Unix(1000, 0).UTC(), Repeat: 1, Timeout: 60}
}

func TestOpen_CreatesAndReopens(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	j := job(1, StateQueued)
	if err := s.Put(j); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Put(j); !errors.Is(err, ErrClosed) {
		t.Fatalf("Put after Close = %v, want ErrClosed", err)
	}
	s2 := open(t, dir)
	got, err := s2.Job(j.ID)
	if err != nil || got.Cmd != "true" || got.State != StateQueued {
		t.Fatalf("reopened record = %+v, %v", got, err)
	}
}

func TestOpen_RefusesUnknownVersion(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	s.Close()
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(BucketMeta).Put(KeyVersion, []byte("7")) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = Open(dir, Options{})
	if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), `"7"`) {
		t.Fatalf("Open = %v, want ErrVersion naming version 7", err)
	}
}

func TestOpen_RefusesForeignFile(t *testing.T) {
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("other")); return err }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrVersion) {
		t.Fatalf("Open = %v, want ErrVersion", err)
	}
}

func TestOpen_LockedAsksAboutAnotherQueued(t *testing.T) {
	dir := t.TempDir()
	open(t, dir)
	_, err := Open(dir, Options{LockTimeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "is another queued using "+dir) {
		t.Fatalf("second Open = %v", err)
	}
}

func TestPut_IndexesFollowState(t *testing.T) {
	s := open(t, t.TempDir())
	a, b, c := job(1, StateQueued), job(2, StateRunning), job(3, StateQueued)
	if err := s.Put(c, a, b); err != nil {
		t.Fatal(err)
	}
	active, err := s.Active()
	if err != nil {
		t.Fatal(err)
	}
	if len(active) != 3 || active[0].ID != a.ID || active[1].ID != b.ID || active[2].ID != c.ID {
		t.Fatalf("active order = %v", ids(active))
	}
	b.State = StateDone
	b.FinishedAt = time.Unix(2000, 0)
	if err := s.Put(b); err != nil {
		t.Fatal(err)
	}
	active, _ = s.Active()
	if len(active) != 2 || active[0].ID != a.ID || active[1].ID != c.ID {
		t.Fatalf("active after done = %v", ids(active))
	}
	fin, _ := s.Finished()
	if len(fin) != 1 || fin[0] != b.ID {
		t.Fatalf("finished = %v", fin)
	}
	if _, err := s.Job(NewID()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Job(unknown) = %v", err)
	}
	if last, err := s.LastSeq(); err != nil || last != 3 {
		t.Fatalf("LastSeq = %d, %v", last, err)
	}
	moved := a
	moved.Seq = 9
	if err := s.Put(moved); err == nil {
		t.Fatal("a record changed its sequence number")
	}
}

func TestJob_LegacyRecordWithoutCardIsCardZero(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	s.Close()
	id := NewID()
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(BucketJobs).Put(seqKey(5), []byte(`{"id":"`+id+`","seq":5,"cmd":"true","cwd":"/","state":"queued"}`)); err != nil {
			return err
		}
		return tx.Bucket(BucketIDs).Put([]byte(id), seqKey(5))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	s2 := open(t, dir)
	active, err := s2.Active()
	if err != nil || len(active) != 1 || active[0].Device != nil || active[0].Card() != 0 {
		t.Fatalf("legacy active = %+v, %v", active, err)
	}
}

func TestMatch_Prefixes(t *testing.T) {
	s := open(t, t.TempDir())
	a, b := job(1, StateQueued), job(2, StateQueued)
	a.ID = "abcdef" + strings.Repeat("0", 26)
	b.ID = "abcdef" + strings.Repeat("1", 26)
	if err := s.Put(a, b); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		prefix string
		want   int
	}{{"abcdef", 2}, {"abcdef0", 1}, {"abcdef1", 1}, {"abcdee", 0}, {a.ID, 1}} {
		got, err := s.Match(tc.prefix, 2)
		if err != nil || len(got) != tc.want {
			t.Errorf("Match(%s) = %v, %v; want %d", tc.prefix, got, err, tc.want)
		}
	}
}

func TestPrune_ByAgeAndCount(t *testing.T) {
	s := open(t, t.TempDir())
	var all []Job
	for i := range 10 {
		j := job(uint64(i+1), StateDone)
		j.FinishedAt = time.Unix(int64(1000+i), 0)
		all = append(all, j)
	}
	all = append(all, job(99, StateQueued))
	if err := s.Put(all...); err != nil {
		t.Fatal(err)
	}
	// Finished before 1003: the first three go.
	gone, err := s.Prune(Retention{Cutoff: time.Unix(1003, 0), Keep: 100})
	if err != nil || len(gone) != 3 || gone[0] != all[0].ID || gone[2] != all[2].ID {
		t.Fatalf("Prune by age = %v, %v", gone, err)
	}
	// Keep the newest 4 of the remaining 7.
	gone, err = s.Prune(Retention{Cutoff: time.Unix(0, 0), Keep: 4})
	if err != nil || len(gone) != 3 || gone[0] != all[3].ID {
		t.Fatalf("Prune by count = %v, %v", gone, err)
	}
	fin, _ := s.Finished()
	if len(fin) != 4 || fin[0] != all[6].ID {
		t.Fatalf("finished left = %v", fin)
	}
	if _, err := s.Job(all[0].ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("pruned job still readable: %v", err)
	}
	if _, err := s.Job(all[10].ID); err != nil {
		t.Fatalf("queued job pruned: %v", err)
	}
}

// TestPrune_KeepsEachOwnersNewest: of each owner's finished jobs
// beyond their newest keep, the oldest go; another owner's, an exempt
// owner's and those with no owner stay, whatever their age, and so do
// queued jobs.
func TestPrune_KeepsEachOwnersNewest(t *testing.T) {
	s := open(t, t.TempDir())
	uid := func(n uint32) *uint32 { return &n }
	var all []Job
	add := func(owner *uint32, state State) Job {
		j := job(uint64(len(all)+1), state)
		j.OwnerUID = owner
		if state == StateDone {
			j.FinishedAt = time.Unix(int64(1000+len(all)), 0)
		}
		all = append(all, j)
		return j
	}
	bob := []Job{add(uid(1002), StateDone), add(uid(1002), StateDone)} // the oldest of all
	var alice []Job
	for range 6 {
		alice = append(alice, add(uid(1001), StateDone))
	}
	var root []Job
	for range 4 {
		root = append(root, add(uid(0), StateDone))
	}
	anon := []Job{add(nil, StateDone), add(nil, StateDone), add(nil, StateDone)}
	queued := []Job{add(uid(1001), StateQueued), add(uid(1001), StateQueued), add(uid(1001), StateQueued)}
	if err := s.Put(all...); err != nil {
		t.Fatal(err)
	}
	var asked []uint32
	gone, err := s.Prune(Retention{Keep: len(all), KeepPerOwner: 2, Exempt: func(u uint32) bool { asked = append(asked, u); return u == 0 }})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{alice[0].ID, alice[1].ID, alice[2].ID, alice[3].ID}
	if !slices.Equal(gone, want) {
		t.Fatalf("Prune with 2 per owner deleted %v; want alice's oldest four %v", gone, want)
	}
	slices.Sort(asked)
	if !slices.Equal(asked, []uint32{0, 1001}) {
		t.Errorf("exempt asked about %v; want once about each owner over the bound", asked)
	}
	for _, kept := range [][]Job{bob, alice[4:], root, anon, queued} {
		for _, j := range kept {
			if _, err := s.Job(j.ID); err != nil {
				t.Errorf("job %s (owner %v, %s) deleted: %v", j.ID, j.OwnerUID, j.State, err)
			}
		}
	}
	if again, err := s.Prune(Retention{Keep: len(all), KeepPerOwner: 2}); err != nil || len(again) != 2 || again[0] != root[0].ID {
		t.Errorf("Prune with 2 per owner and no one exempt = %v, %v; want root's oldest two", again, err)
	}
}

// TestPrune_OwnersShareBeforeTheTotal: a burst of one owner's jobs that
// takes the total past Keep costs that owner's records, not the oldest
// of another's: each owner is cut to their share before the total is.
func TestPrune_OwnersShareBeforeTheTotal(t *testing.T) {
	s := open(t, t.TempDir())
	var all []Job
	for i, owner := range []uint32{1002, 1002, 1001, 1001, 1001, 1001, 1001, 1001} {
		j := job(uint64(i+1), StateDone)
		j.OwnerUID, j.FinishedAt = &owner, time.Unix(int64(1000+i), 0)
		all = append(all, j)
	}
	if err := s.Put(all...); err != nil {
		t.Fatal(err)
	}
	gone, err := s.Prune(Retention{Keep: 6, KeepPerOwner: 3})
	if want := []string{all[2].ID, all[3].ID, all[4].ID}; err != nil || !slices.Equal(gone, want) {
		t.Fatalf("Prune(6 in all, 3 each) deleted %v, %v; want the burst's oldest three %v", gone, err, want)
	}
}

// TestOpen_GrowsOnceAndSparse: a new store takes its file size in one
// step, so a thousand submissions never wait for the file to grow, and
// the pages it has not written take no disk space.
func TestOpen_GrowsOnceAndSparse(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	path := filepath.Join(dir, FileName)
	size := func() (apparent, used int64) {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		return st.Size, st.Blocks * 512
	}
	first, _ := size()
	if first != initialMmapSize {
		t.Fatalf("new store file is %d bytes, want %d", first, initialMmapSize)
	}
	jobs := make([]Job, 1000)
	for i := range jobs {
		jobs[i] = job(uint64(i+1), StateQueued)
	}
	if err := s.Put(jobs...); err != nil {
		t.Fatal(err)
	}
	apparent, used := size()
	if apparent != first {
		t.Errorf("file grew from %d to %d bytes within 1000 jobs", first, apparent)
	}
	if used > initialMmapSize/4 {
		t.Errorf("file uses %d bytes of disk for 1000 jobs; the unwritten part should be a hole", used)
	}
}

func TestPut_ConcurrentWritersShareCommits(t *testing.T) {
	s := open(t, t.TempDir())
	// Hold bbolt's writer lock so the group commit stalls on a first
	// request while the others pile up behind it.
	tx, err := s.db.Begin(true)
	if err != nil {
		t.Fatal(err)
	}
	var release sync.Once
	unlock := func() { release.Do(func() { tx.Rollback() }) }
	t.Cleanup(unlock) // before the store's Close, which waits for the loop
	before := s.Stats()
	const n = 64
	errs := make(chan error, n)
	var wg sync.WaitGroup
	put := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.Put(job(uint64(i+1), StateQueued))
		}()
	}
	waitFor := func(what string, cond func() bool) {
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				unlock()
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(time.Millisecond) // polling a condition with a deadline
		}
	}
	put(0)
	waitFor("the first commit to start", func() bool { return s.Stats().Commits == before.Commits+1 })
	for i := 1; i < n; i++ {
		put(i)
	}
	waitFor("63 queued requests", func() bool { return s.gc.pendingLen() == n-1 })
	unlock()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := s.Stats()
	if commits := got.Commits - before.Commits; commits != 2 {
		t.Fatalf("%d writes took %d commits, want 2", n, commits)
	}
	active, _ := s.Active()
	if len(active) != n {
		t.Fatalf("active = %d", len(active))
	}
}

func TestCardsAndProbe(t *testing.T) {
	s := open(t, t.TempDir())
	if err := s.PutCards(Card{ID: 1, State: "dead", DeadBootID: "b"}, Card{ID: 0, State: "healthy", ResetEpoch: 3}); err != nil {
		t.Fatal(err)
	}
	cards, err := s.Cards()
	if err != nil || len(cards) != 2 || cards[0].ResetEpoch != 3 || cards[1].State != "dead" {
		t.Fatalf("Cards = %+v, %v", cards, err)
	}
	if err := s.Probe(); err != nil {
		t.Fatal(err)
	}
}

func TestCommit_CardsAndJobsTogether(t *testing.T) {
	s := open(t, t.TempDir())
	j := job(1, StateDone)
	j.FinishedAt = time.Unix(2000, 0)
	since := time.Unix(3000, 0).UTC()
	dead := Card{ID: 0, State: CardDead, DeadBootID: "b", DeadReason: "health check failed", DeadSince: since,
		ResetEpoch: 1, LastResetResult: "failed", LastResetDetail: "health check exited 1"}
	if err := s.Commit([]Card{dead}, j); err != nil {
		t.Fatal(err)
	}
	cards, err := s.Cards()
	if err != nil || len(cards) != 1 || cards[0].State != CardDead || !cards[0].DeadSince.Equal(since) || cards[0].LastResetResult != "failed" {
		t.Fatalf("Cards = %+v, %v", cards, err)
	}
	if got, err := s.Job(j.ID); err != nil || got.State != StateDone {
		t.Fatalf("Job = %+v, %v", got, err)
	}

	// A job record that cannot be written takes the card record with it.
	bad := j
	bad.Seq = 2 // a record may not change its sequence number
	healthy := Card{ID: 0, State: CardHealthy, ResetEpoch: 2}
	if err := s.Commit([]Card{healthy}, bad); err == nil {
		t.Fatal("Commit accepted a job that changed its sequence number")
	}
	if cards, _ := s.Cards(); cards[0].State != CardDead || cards[0].ResetEpoch != 1 {
		t.Fatalf("card record changed by a failed commit: %+v", cards[0])
	}
}

func TestPut_RejectsMalformedID(t *testing.T) {
	s := open(t, t.TempDir())
	j := job(1, StateQueued)
	j.ID = "nothex"
	if err := s.Put(j); err == nil {
		t.Fatal("Put accepted a malformed id")
	}
}

func ids(js []Job) string {
	var b strings.Builder
	for _, j := range js {
		fmt.Fprintf(&b, "%d:%s ", j.Seq, j.ID[:6])
	}
	return b.String()
}
