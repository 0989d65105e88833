package legacyimport_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/internal/usertest"
	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/legacyimport"
	"github.com/ttkit/ttkit/queued/store"
)

// sharedStore is a system-mode store in a new directory holding vera's
// queued job, with a secret in its environment, as her submission left
// it; it returns the directory and the job.
func sharedStore(t *testing.T, vera usertest.User) (string, store.Job) {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	zero, uid := 0, vera.UID
	j := store.Job{ID: store.NewID(), Seq: 1, Kind: store.KindJob, Device: &zero, Cmd: "train --resume", Cwd: vera.Home,
		Env: map[string]string{"API_TOKEN": "vera's secret"}, Timeout: 600, Repeat: 1, ClientID: "vera",
		OwnerUID: &uid, Owner: vera.Name, State: store.StateQueued, SubmittedAt: time.Now()}
	if err := st.Put(j); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, j
}

// craftedDB is a database of u's in u's home whose rows are given.
func craftedDB(t *testing.T, u usertest.User, sub string, rows []map[string]any) string {
	t.Helper()
	d := filepath.Join(u.Home, sub)
	db := filepath.Join(d, legacyimport.DBName)
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	kmdtest.MakeLegacyDB(t, map[string]any{"path": db, "rows": rows})
	chown(t, u, d, db)
	return db
}

// sqlExec runs statements on the database at db, as the Python tool
// writing it would, and leaves its files u's.
func sqlExec(t *testing.T, u usertest.User, db string, stmts ...string) {
	t.Helper()
	sqlExecAsMe(t, db, stmts...)
	for _, p := range []string{db, db + "-wal", db + "-shm"} {
		if _, err := os.Lstat(p); err == nil {
			chown(t, u, p)
		}
	}
}

// sqlExecAsMe runs statements on the database at db.
func sqlExecAsMe(t *testing.T, db string, stmts ...string) {
	t.Helper()
	script := "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1], isolation_level=None)\nfor s in sys.argv[2:]:\n    c.execute(s)\nc.close()\n"
	if out, err := exec.Command("python3", append([]string{"-c", script, db}, stmts...)...).CombinedOutput(); err != nil {
		t.Fatalf("changing %s: %v\n%s", db, err, out)
	}
}

// unchanged fails t unless the stored record of want's id is still
// want: its owner, command and environment.
func unchanged(t *testing.T, st *store.Store, want store.Job) {
	t.Helper()
	got, err := st.Job(want.ID)
	if err != nil {
		t.Fatalf("job %s: %v", want.ID, err)
	}
	if got.OwnerUID == nil || *got.OwnerUID != *want.OwnerUID || got.Owner != want.Owner || got.Cmd != want.Cmd ||
		got.Env["API_TOKEN"] != want.Env["API_TOKEN"] || got.State != want.State || got.Seq != want.Seq {
		t.Errorf("job %s is now %s's, %q, %v, %s; want %s's untouched record", want.ID, got.Owner, got.Cmd, got.Env, got.State, want.Owner)
	}
}

// TestImport_CraftedRowNeverReplacesAnotherUsersJob: mallory, who saw
// vera's queued job id in list --json, crafts a database whose row reuses
// it (saying the job is done, or queued with mallory's command) and has
// root import it into the system-mode store. Vera's record stays hers,
// untouched; mallory's row becomes a job of mallory's under a fresh id.
func TestImport_CraftedRowNeverReplacesAnotherUsersJob(t *testing.T) {
	usertest.RequireRoot(t)
	t.Parallel()
	vera, mallory := usertest.New(t, "ttcv"), usertest.New(t, "ttcm")
	for _, status := range []string{"done", "queued"} {
		t.Run(status, func(t *testing.T) {
			dir, victim := sharedStore(t, vera)
			row := map[string]any{"id": victim.ID, "cmd": "cat ~/loot", "cwd": mallory.Home, "mode": "run", "status": status,
				"submitted": 1.0, "client_id": "mallory"}
			if status == "done" {
				row["exit_code"], row["started_at"], row["finished_at"] = 0, 1.0, 2.0
			}
			db := craftedDB(t, mallory, "crafted-"+status, []map[string]any{row})
			o := opts()
			o.Mode = api.SystemMode
			rep, err := legacyimport.ImportInto(dir, db, o)
			if err != nil {
				t.Fatalf("import: %+v %v", rep, err)
			}
			fresh := rep.Renamed[victim.ID]
			if !store.ValidID(fresh) || fresh == victim.ID || !slices.Equal(rep.TakenIDs, []string{victim.ID}) {
				t.Fatalf("report: renamed %v, taken %v; want vera's id taken and mapped to a fresh one", rep.Renamed, rep.TakenIDs)
			}
			st := openStore(t, dir)
			unchanged(t, st, victim)
			m, err := st.Job(fresh)
			if err != nil {
				t.Fatal(err)
			}
			if m.LegacyID != victim.ID || m.OwnerUID == nil || *m.OwnerUID != mallory.UID || m.Cmd != "cat ~/loot" || len(m.Env) != 0 || m.ImportSource != db {
				t.Errorf("mallory's row became %+v; want mallory's, legacy id %s, source %s", m, victim.ID, db)
			}
			if ids, _ := st.Match(victim.ID[:8], 3); len(ids) != 1 || ids[0] != victim.ID {
				t.Errorf("vera's id prefix matches %v, want only her job", ids)
			}
			st.Close()
			// Read again after the tool ran mallory's queued row and
			// queued another, her row is found under its new id and
			// updated there: nothing is added twice, and vera's job is
			// still hers, queued.
			sqlExec(t, mallory, db, "UPDATE jobs SET status='done', exit_code=0, started_at=5, finished_at=6",
				"INSERT INTO jobs (id, cmd, cwd, mode, status, submitted, client_id, log_truncated, dropped_log_bytes) VALUES ('feedfacefeedfacefeedfacefeedface', 'true', '/', 'run', 'queued', 7, 'mallory', 0, 0)")
			rep, err = legacyimport.ImportInto(dir, db, o)
			if err != nil || rep.Queued != 1 || rep.Updated != map[string]int{"done": 0, "queued": 1}[status] || len(rep.TakenIDs) != 0 {
				t.Fatalf("the second import: %+v %v; want one new queued job, mallory's row updated if it was queued", rep, err)
			}
			st = openStore(t, dir)
			unchanged(t, st, victim)
			if m, err := st.Job(fresh); err != nil || m.State != store.StateDone || m.OwnerUID == nil || *m.OwnerUID != mallory.UID {
				t.Errorf("mallory's row after the second import: %+v %v; want it done, hers", m, err)
			}
			active, err := st.Active()
			if err != nil {
				t.Fatal(err)
			}
			if len(active) != 2 || active[0].ID != victim.ID || active[1].ID != "feedfacefeedfacefeedfacefeedface" {
				t.Errorf("active after two imports: %+v; want vera's job, then mallory's new one", active)
			}
		})
	}
}

// TestImport_DatabaseChangedHandsNeverChangesAnOwner: ana's database is
// imported into the system-mode store; the file then changes hands
// (chowned to mallory, who rewrites ana's queued row and adds one of
// hers). Imported again, ana's job stays hers and queued, the row is
// refused and named in the report, and mallory's new row is hers. With
// nothing else new, the import fails naming the refused row.
func TestImport_DatabaseChangedHandsNeverChangesAnOwner(t *testing.T) {
	usertest.RequireRoot(t)
	t.Parallel()
	ana, mallory := usertest.New(t, "ttha"), usertest.New(t, "tthm")
	const anas = "a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0"
	db := craftedDB(t, ana, "tool", []map[string]any{q(anas, "ana")})
	dir := t.TempDir()
	o := opts()
	o.Mode = api.SystemMode
	if rep, err := legacyimport.ImportInto(dir, db, o); err != nil || rep.Queued != 1 {
		t.Fatalf("ana's import: %+v %v", rep, err)
	}
	st := openStore(t, dir)
	before, err := st.Job(anas)
	if err != nil || before.ImportSource != db || before.LegacyID != anas || before.OwnerUID == nil || *before.OwnerUID != ana.UID {
		t.Fatalf("ana's imported job: %+v %v", before, err)
	}
	st.Close()

	chown(t, mallory, filepath.Dir(db), db)
	sqlExec(t, mallory, db, "UPDATE jobs SET status='done', exit_code=0, started_at=5, finished_at=6, cmd='cat ~/loot'")
	_, err = legacyimport.ImportInto(dir, db, o)
	if !errors.Is(err, legacyimport.ErrUnsafe) || !strings.Contains(err.Error(), "row "+anas) || !strings.Contains(err.Error(), "never changes a job's owner") {
		t.Fatalf("the import of the rewritten row alone: %v; want it refused, naming the row", err)
	}
	sqlExec(t, mallory, db, "INSERT INTO jobs (id, cmd, cwd, mode, status, submitted, client_id, log_truncated, dropped_log_bytes) VALUES ('b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1', 'true', '/', 'run', 'queued', 7, 'mallory', 0, 0)")
	rep, err := legacyimport.ImportInto(dir, db, o)
	if err != nil || rep.Queued != 1 || rep.Updated != 0 || !strings.Contains(rep.Refused[anas], "never changes a job's owner") {
		t.Fatalf("the import with a new row: %+v %v; want the new row, ana's refused", rep, err)
	}
	st = openStore(t, dir)
	unchanged(t, st, before)
	if j, err := st.Job("b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1"); err != nil || j.OwnerUID == nil || *j.OwnerUID != mallory.UID {
		t.Errorf("mallory's new row: %+v %v; want hers", j, err)
	}
}

// TestImport_AgainIntoAStoreFromBeforeSources: a store whose imported
// records were written before records carried their source (no
// import_source) is imported into again from the same database: the
// records are still the source's to update, and none is added twice.
func TestImport_AgainIntoAStoreFromBeforeSources(t *testing.T) {
	t.Parallel()
	old := t.TempDir()
	db := filepath.Join(old, legacyimport.DBName)
	const first, second = "c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0", "c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1"
	kmdtest.MakeLegacyDB(t, map[string]any{"path": db, "rows": []map[string]any{q(first, "ana"), q(second, "ana")}})
	dir := t.TempDir()
	if _, err := legacyimport.ImportInto(dir, db, opts()); err != nil {
		t.Fatal(err)
	}
	st := openStore(t, dir)
	for _, id := range []string{first, second} {
		j, err := st.Job(id)
		if err != nil {
			t.Fatal(err)
		}
		j.ImportSource, j.LegacyID = "", ""
		if err := st.Put(j); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	sqlExecAsMe(t, db, "UPDATE jobs SET status='done', exit_code=0, started_at=5, finished_at=6 WHERE id='"+first+"'")
	rep, err := legacyimport.ImportInto(dir, db, opts())
	if err != nil || rep.Updated != 1 || rep.Unchanged != 1 || len(rep.TakenIDs) != 0 {
		t.Fatalf("the second import: %+v %v; want the run job updated, the other unchanged", rep, err)
	}
	st = openStore(t, dir)
	active, _ := st.Active()
	if j, _ := st.Job(first); j.State != store.StateDone || j.ImportSource != db || len(active) != 1 || active[0].ID != second {
		t.Errorf("after the second import: %+v, active %+v", j, active)
	}
}

// TestImport_RowsThatMapToOneIDBothArrive: two rows whose ids differ only
// in case (or dashes) would both become the same queued id; the second
// gets a fresh one rather than failing the whole import.
func TestImport_RowsThatMapToOneIDBothArrive(t *testing.T) {
	t.Parallel()
	old := t.TempDir()
	kmdtest.MakeLegacyDB(t, map[string]any{"path": filepath.Join(old, legacyimport.DBName),
		"rows": []map[string]any{q(strings.Repeat("ABCD", 8), "ana"), q(strings.Repeat("abcd", 8), "ana"), q(strings.Repeat("ab-cd", 8), "ana")}})
	dir := t.TempDir()
	rep, err := legacyimport.ImportInto(dir, old, opts())
	if err != nil || rep.Queued != 3 || len(rep.TakenIDs) != 2 {
		t.Fatalf("import: %+v %v; want 3 queued, 2 taken ids", rep, err)
	}
	st := openStore(t, dir)
	active, _ := st.Active()
	legacy := map[string]bool{}
	for _, j := range active {
		legacy[j.LegacyID] = true
	}
	if len(active) != 3 || len(legacy) != 3 {
		t.Errorf("active: %+v; want the three rows, each with its old id", active)
	}
	byLegacy := map[string]string{}
	for _, j := range active {
		byLegacy[j.LegacyID] = j.ID
	}
	st.Close()
	// Read again after the tool ran one of them: each row finds its own
	// job again, the one that ran is updated, nothing is added.
	ran := strings.Repeat("ab-cd", 8)
	sqlExecAsMe(t, filepath.Join(old, legacyimport.DBName), "UPDATE jobs SET status='done', exit_code=0, started_at=5, finished_at=6 WHERE id='"+ran+"'")
	rep, err = legacyimport.ImportInto(dir, old, opts())
	if err != nil || rep.Updated != 1 || rep.Unchanged != 2 || len(rep.TakenIDs) != 0 {
		t.Fatalf("the second import: %+v %v; want one updated, two unchanged", rep, err)
	}
	st = openStore(t, dir)
	active, _ = st.Active()
	if j, _ := st.Job(byLegacy[ran]); len(active) != 2 || j.State != store.StateDone || j.LegacyID != ran {
		t.Errorf("after the second import: active %+v, the run row's job %+v", active, j)
	}
}
