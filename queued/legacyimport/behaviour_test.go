package legacyimport_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/queued/legacyimport"
	"github.com/ttkit/ttkit/queued/store"
)

// openStore opens dir's store for the rest of the test.
func openStore(t *testing.T, dir string) *store.Store {
	t.Helper()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// byOld is the stored job whose id starts with the old id.
func byOld(t *testing.T, st *store.Store, old string) store.Job {
	t.Helper()
	ids, err := st.Match(old, 2)
	if err != nil || len(ids) != 1 {
		t.Fatalf("old id %s matches %v (%v)", old, ids, err)
	}
	j, err := st.Job(ids[0])
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// q is a queued row of client.
func q(id, client string) map[string]any {
	return map[string]any{"id": id, "cmd": "echo " + id, "cwd": "/", "submitted": 1.0, "status": "queued", "mode": "run", "client_id": client}
}

// TestImport_QueuedJobsTakeTheToolsTurns: the Python tool takes turns
// between clients, in the order of their oldest queued job, one job each;
// the import queues the jobs in that order (seq order would run all of
// alice's first).
func TestImport_QueuedJobsTakeTheToolsTurns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	kmdtest.MakeLegacyDB(t, map[string]any{"path": filepath.Join(dir, legacyimport.DBName), "rows": []map[string]any{
		q("aaaa0001", "alice"), q("aaaa0002", "alice"), q("aaaa0003", "alice"),
		q("bbbb0001", "bob"), q("cccc0001", "carol"), q("bbbb0002", "bob"),
	}})
	if _, _, err := legacyimport.ImportOnStart(dir, opts()); err != nil {
		t.Fatal(err)
	}
	active, err := openStore(t, dir).Active()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range active {
		got = append(got, j.ID[:8])
	}
	if want := []string{"aaaa0001", "bbbb0001", "cccc0001", "aaaa0002", "bbbb0002", "aaaa0003"}; !slices.Equal(got, want) {
		t.Fatalf("queued order %v, want the tool's turns %v", got, want)
	}
}

// TestImport_PendingAndInterruptedResets: a reset the tool had pending
// (reset_pending) or was running when it stopped (state resetting, its
// reset row running) is carried over as a queued reset of the card, ahead
// of its queued jobs, on this boot only (the tool drops one of an earlier
// boot, as a reboot resets the card); it runs in / with nothing of the
// row.
func TestImport_PendingAndInterruptedResets(t *testing.T) {
	t.Parallel()
	boot := kmdtest.BootID(t)
	for _, tc := range []struct {
		name  string
		state map[string]any
		rows  []map[string]any
		want  bool
	}{
		{"reset_pending", map[string]any{"state": "healthy", "reset_pending": 1, "boot_id": boot, "reset_epoch": 4}, nil, true},
		{"resetting", map[string]any{"state": "resetting", "reset_pending": 0, "boot_id": boot, "reset_epoch": 4},
			[]map[string]any{{"id": "eeee0001", "cmd": "[device reset] tt-smi -r", "cwd": "", "mode": "reset", "status": "running", "client_id": "system",
				"submitted": 5.0, "started_at": 5.0, "env_json": `{"LD_PRELOAD":"/tmp/evil.so"}`}}, true},
		{"pending on an earlier boot", map[string]any{"state": "healthy", "reset_pending": 1, "boot_id": "an-earlier-boot", "reset_epoch": 4}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			rows := append(slices.Clone(tc.rows), q("aaaa0001", "alice"), q("aaaa0002", "bob"))
			kmdtest.MakeLegacyDB(t, map[string]any{"path": filepath.Join(dir, legacyimport.DBName), "rows": rows,
				"device_state": []map[string]any{tc.state}})
			rep, _, err := legacyimport.ImportOnStart(dir, opts())
			if err != nil {
				t.Fatal(err)
			}
			st := openStore(t, dir)
			active, _ := st.Active()
			if !tc.want {
				if len(active) != 2 || active[0].Kind != store.KindJob || len(rep.PendingResets) != 0 {
					t.Fatalf("queue %+v; want no reset from an earlier boot", active)
				}
				return
			}
			if len(active) != 3 || active[0].Kind != store.KindReset || active[0].Card() != 0 || active[0].BootID != boot ||
				active[0].Cwd != "/" || len(active[0].Env) != 0 || !slices.Equal(rep.PendingResets, []int{0}) {
				t.Fatalf("queue %+v (report %+v); want the pending reset first, in /, on this boot", active, rep)
			}
			if tc.rows != nil {
				r := byOld(t, st, "eeee0001")
				if r.State != store.StateDone || r.Outcome != store.OutcomeInterrupted || r.Cwd != "/" || len(r.Env) != 0 {
					t.Fatalf("the interrupted reset row became %+v", r)
				}
			}
		})
	}
}

// TestImport_InterruptedRunTimeAndLastReset: a job that was running when
// the tool died ran at least until its last sign of life (here its
// output's last write, 18 s after it started), not until its row's last
// update; a card's last reset names its reset job, so status and reset
// JOB can say which and how it went.
func TestImport_InterruptedRunTimeAndLastReset(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	start := time.Now().Add(-time.Hour).Truncate(time.Second)
	out := output(t, dir, "aaaa0005", "partial\n")
	if err := os.Chtimes(out, start.Add(18*time.Second), start.Add(18*time.Second)); err != nil {
		t.Fatal(err)
	}
	ts := func(d time.Duration) float64 { return float64(start.Add(d).UnixNano()) / 1e9 }
	kmdtest.MakeLegacyDB(t, map[string]any{"path": filepath.Join(dir, legacyimport.DBName), "rows": []map[string]any{
		{"id": "ffff0001", "cmd": "[device reset] tt-smi -r", "cwd": "", "mode": "reset", "status": "done", "exit_code": 0, "client_id": "system",
			"submitted": ts(-time.Minute), "started_at": ts(-time.Minute), "finished_at": ts(-50 * time.Second)},
		{"id": "aaaa0005", "cmd": "sleep 100", "cwd": dir, "mode": "run", "status": "running", "client_id": "alice", "reset_epoch": 1,
			"submitted": ts(0), "started_at": ts(0), "updated_at": ts(24 * time.Millisecond), "output_file": out},
	}, "device_state": []map[string]any{{"state": "healthy", "reset_epoch": 1, "reset_pending": 0, "boot_id": kmdtest.BootID(t),
		"last_reset_at": ts(-50 * time.Second), "updated_at": ts(-50 * time.Second)}}})
	db := filepath.Join(dir, legacyimport.DBName)
	if err := os.Chtimes(db, start.Add(time.Second), start.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := legacyimport.ImportOnStart(dir, opts()); err != nil {
		t.Fatal(err)
	}
	st := openStore(t, dir)
	j := byOld(t, st, "aaaa0005")
	if ran := j.FinishedAt.Sub(j.StartedAt); ran < 17*time.Second || ran > 19*time.Second {
		t.Fatalf("the interrupted job ran %v by its record, want about 18s (its output's last write)", ran)
	}
	cards, _ := st.Cards()
	reset := byOld(t, st, "ffff0001")
	if len(cards) != 1 || cards[0].LastResetID != reset.ID || cards[0].LastResetResult != "ok" || cards[0].LastResetDetail == "" {
		t.Fatalf("card %+v; want its last reset %s, ok", cards, reset.ID)
	}
}

// TestImport_LastResetWithoutItsRow: when the reset's own row is gone
// (pruned) the card's last_reset_at still gives status a last reset with a
// job to name.
func TestImport_LastResetWithoutItsRow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	at := float64(time.Now().Add(-time.Hour).Unix())
	kmdtest.MakeLegacyDB(t, map[string]any{"path": filepath.Join(dir, legacyimport.DBName),
		"device_state": []map[string]any{{"state": "healthy", "reset_epoch": 3, "reset_pending": 0, "boot_id": kmdtest.BootID(t), "last_reset_at": at, "updated_at": at}}})
	if _, _, err := legacyimport.ImportOnStart(dir, opts()); err != nil {
		t.Fatal(err)
	}
	st := openStore(t, dir)
	cards, _ := st.Cards()
	if len(cards) != 1 || cards[0].LastResetID == "" || cards[0].LastResetResult != "ok" {
		t.Fatalf("card %+v; want a last reset with its job", cards)
	}
	r, err := st.Job(cards[0].LastResetID)
	if err != nil || r.Kind != store.KindReset || r.State != store.StateDone || !r.FinishedAt.Equal(time.Unix(int64(at), 0)) {
		t.Fatalf("the last reset's record %+v %v", r, err)
	}
}
