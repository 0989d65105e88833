package legacyimport_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/queued/legacyimport"
	"github.com/ttkit/ttkit/queued/store"
)

// output writes a job's output file where the Python tool keeps it.
func output(t *testing.T, dir, id, text string) string {
	t.Helper()
	p := filepath.Join(dir, id, "output")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// fingerprint is every jobs.sqlite3* file's name and content hash.
func fingerprint(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	m := map[string][32]byte{}
	files, _ := filepath.Glob(filepath.Join(dir, legacyimport.DBName+"*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m[filepath.Base(f)] = sha256.Sum256(b)
	}
	return m
}

func opts() legacyimport.Options {
	return legacyimport.Options{DefaultTimeout: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// legacyRows is a history in submission order over two cards: two
// finished jobs, queued jobs on both cards and one without a card, and a
// job that was running.
func legacyRows(t *testing.T, dir, card string, val func(int) any) []map[string]any {
	row := func(id string, c any, status, cmd string, extra map[string]any) map[string]any {
		r := map[string]any{"id": id, "cmd": cmd, "cwd": dir, "timeout": 600, "repeat": 1, "mode": "run",
			"submitted": 1_700_000_000.5, "status": status, "env_json": "{}", "client_id": "alice"}
		if card != "" {
			r[card] = c
		}
		for k, v := range extra {
			r[k] = v
		}
		return r
	}
	return []map[string]any{
		row("aaaa0001", val(1), "done", "python3 a.py", map[string]any{"exit_code": 0, "repeat": 2, "repeat_completed": 2,
			"started_at": 1_700_000_010.0, "finished_at": 1_700_000_030.0, "env_json": `{"BATCH":"64","TT_QUEUE_JOB_ID":"x"}`,
			"output_file": output(t, dir, "aaaa0001", "one\n"), "log_size": 4}),
		row("aaaa0002", val(0), "done", "python3 slow.py", map[string]any{"exit_code": -9, "timed_out": 1,
			"started_at": 1_700_000_031.0, "finished_at": 1_700_000_631.0, "output_file": output(t, dir, "aaaa0002", "slow\n")}),
		row("aaaa0003", val(1), "queued", "echo q1", nil),
		row("aaaa0004", nil, "queued", "echo legacy", nil),
		row("aaaa0005", val(0), "running", "sleep 100", map[string]any{"started_at": 1_700_000_700.0,
			"output_file": output(t, dir, "aaaa0005", "partial\n")}),
		row("aaaa0006", val(1), "queued", "echo q2", nil),
		row("aaaa0007", val(0), "queued", "echo q3", map[string]any{"timeout": 0}),
	}
}

// TestImportOnStart_CarriesEveryJob imports a two-card database whose
// newest commits are still in its WAL, and checks every kind of row.
func TestImportOnStart_CarriesEveryJob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, column, typ string
		val               func(int) any
	}{
		{"device_id integer", "device_id", "INTEGER", func(n int) any { return n }},
		{"device text", "device", "TEXT", func(n int) any { return string(rune('0' + n)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			kmdtest.MakeLegacyDB(t, map[string]any{"path": filepath.Join(dir, legacyimport.DBName), "card_column": tc.column, "card_type": tc.typ,
				"keep_wal": true, "rows": legacyRows(t, dir, tc.column, tc.val),
				"device_state": []map[string]any{
					{tc.column: tc.val(0), "state": "healthy", "reset_epoch": 3, "boot_id": kmdtest.BootID(t), "last_reset_at": 1_700_000_001.0},
					{tc.column: tc.val(1), "state": "dead", "reset_epoch": 1, "boot_id": kmdtest.BootID(t), "dead_since": 1_700_000_800.0, "dead_reason": "health check failed"},
				}})
			if _, err := os.Stat(filepath.Join(dir, legacyimport.DBName+"-wal")); err != nil {
				t.Fatalf("the test database has no WAL: %v", err)
			}
			before := fingerprint(t, dir)

			var logged bytes.Buffer
			o := opts()
			o.Logger = slog.New(slog.NewTextHandler(&logged, nil))
			rep, done, err := legacyimport.ImportOnStart(dir, o)
			if want := "queued=4 interrupted=1 finished=2"; !strings.Contains(logged.String(), want) {
				t.Fatalf("the import's log line lacks %q:\n%s", want, logged.String())
			}
			if err != nil || !done {
				t.Fatalf("ImportOnStart: %v, imported %v", err, done)
			}
			if rep.Queued != 4 || rep.Interrupted != 1 || rep.Finished != 2 || !slices.Equal(rep.DeadCards, []int{1}) {
				t.Fatalf("report %+v, want 4 queued, 1 interrupted, 2 finished, card 1 dead", rep)
			}
			if after := fingerprint(t, dir); !maps(before, after) {
				t.Fatalf("the old database changed: %v -> %v", before, after)
			}
			checkImported(t, dir)

			if _, again, err := legacyimport.ImportOnStart(dir, opts()); again || err != nil {
				t.Fatalf("a second start imported again: %v %v", again, err)
			}
		})
	}
}

// maps compares two fingerprints: the same files, and the same content
// but for the -shm file, SQLite's shared-memory index of the WAL, which
// every reader updates (its read marks), the Python tool's own included;
// it holds no data.
func maps(a, b map[string][32]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || (w != v && !strings.HasSuffix(k, "-shm")) {
			return false
		}
	}
	return true
}

// checkImported reads the new store and checks legacyRows' records.
func checkImported(t *testing.T, dir string) {
	t.Helper()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	active, err := st.Active()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range active {
		got = append(got, j.ID[:8]+"@"+string(rune('0'+j.Card())))
		if !store.ValidID(j.ID) || j.State != store.StateQueued || j.Device == nil {
			t.Fatalf("queued record %+v", j)
		}
	}
	if want := []string{"aaaa0003@1", "aaaa0004@0", "aaaa0006@1", "aaaa0007@0"}; !slices.Equal(got, want) {
		t.Fatalf("queued jobs %v, want %v in the old order", got, want)
	}
	if active[3].Timeout != 3600 || active[0].Timeout != 600 || active[0].ClientID != "alice" || active[0].Cmd != "echo q1" || active[0].Cwd != dir {
		t.Fatalf("queued records %+v", active)
	}
	find := func(prefix string) store.Job {
		ids, err := st.Match(prefix, 2)
		if err != nil || len(ids) != 1 {
			t.Fatalf("old id %s matches %v (%v)", prefix, ids, err)
		}
		j, err := st.Job(ids[0])
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	readOut := func(j store.Job) string {
		b, err := os.ReadFile(filepath.Join(dir, "output", j.ID+".log"))
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(filepath.Join(dir, "output", j.ID+".log"))
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("output copy has mode %v", fi.Mode())
		}
		return string(b)
	}
	ok := find("aaaa0001")
	if ok.State != store.StateDone || ok.Outcome != store.OutcomeSuccess || *ok.ExitCode != 0 || ok.Iterations != 2 ||
		!ok.StartedAt.Equal(time.Unix(1_700_000_010, 0)) || !ok.FinishedAt.Equal(time.Unix(1_700_000_030, 0)) ||
		ok.Env["BATCH"] != "64" || len(ok.Env) != 1 || ok.LogBytes != 4 || readOut(ok) != "one\n" || ok.Card() != 1 {
		t.Fatalf("finished record %+v", ok)
	}
	slow := find("aaaa0002")
	if slow.Outcome != store.OutcomeTimeout || *slow.ExitCode != -9 || readOut(slow) != "slow\n" {
		t.Fatalf("timed-out record %+v", slow)
	}
	run := find("aaaa0005")
	if run.State != store.StateDone || run.Outcome != store.OutcomeInterrupted || *run.ExitCode != -1 ||
		!strings.Contains(run.Error, "Python tt-device-queue") || readOut(run) != "partial\n" {
		t.Fatalf("running record %+v", run)
	}
	cards, err := st.Cards()
	if err != nil || len(cards) != 2 {
		t.Fatalf("cards %+v %v", cards, err)
	}
	if c := cards[0]; c.ID != 0 || c.State != store.CardHealthy || c.ResetEpoch != 3 {
		t.Fatalf("card 0 %+v", c)
	}
	if c := cards[1]; c.ID != 1 || c.State != store.CardDead || c.DeadBootID != kmdtest.BootID(t) || c.DeadReason != "health check failed" {
		t.Fatalf("card 1 %+v", c)
	}
}

// TestImportOnStart_SingleCardDatabase: the generation without a card
// column has one card, 0, and a device_state singleton.
func TestImportOnStart_SingleCardDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rows := legacyRows(t, dir, "", func(int) any { return nil })
	kmdtest.MakeLegacyDB(t, map[string]any{"path": filepath.Join(dir, legacyimport.DBName), "rows": rows,
		"device_state": []map[string]any{{"state": "dead", "boot_id": "an-earlier-boot", "dead_reason": "x", "dead_since": 1_700_000_000.0}}})
	before := fingerprint(t, dir)
	rep, done, err := legacyimport.ImportOnStart(dir, opts())
	if after := fingerprint(t, dir); !maps(before, after) {
		t.Fatalf("the old database changed: %v -> %v", before, after)
	}
	if err != nil || !done || rep.Queued != 4 {
		t.Fatalf("ImportOnStart: %+v %v %v", rep, done, err)
	}
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	active, _ := st.Active()
	for _, j := range active {
		if j.Device == nil || *j.Device != 0 {
			t.Fatalf("a single-card job went to %v", j.Device)
		}
	}
	cards, _ := st.Cards()
	if len(cards) != 1 || cards[0].State != store.CardDead || cards[0].DeadBootID != "an-earlier-boot" {
		t.Fatalf("cards %+v; want card 0 dead on its old boot (the scheduler clears it)", cards)
	}
}

// TestImportOnStart_IsAtomic: a row that cannot be imported stops the
// whole import and leaves no store, no output copy and no scratch behind.
func TestImportOnStart_IsAtomic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rows := legacyRows(t, dir, "device_id", func(n int) any { return n })
	rows = append(rows, map[string]any{"id": "bad00001", "cmd": "x", "status": "paused", "submitted": 1.0})
	kmdtest.MakeLegacyDB(t, map[string]any{"path": filepath.Join(dir, legacyimport.DBName), "card_column": "device_id", "rows": rows})
	_, done, err := legacyimport.ImportOnStart(dir, opts())
	if err == nil || done || !strings.Contains(err.Error(), `"paused"`) || !strings.Contains(err.Error(), "bad00001") {
		t.Fatalf("a row with status paused: %v (imported %v)", err, done)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() == store.FileName || e.Name() == "output" || strings.HasPrefix(e.Name(), ".import") {
			t.Fatalf("a failed import left %s behind", e.Name())
		}
	}
}

// TestImportInto_ExistingStore adds the old jobs after the store's own,
// once; and refuses while a daemon holds the store.
func TestImportInto_ExistingStore(t *testing.T) {
	t.Parallel()
	old := t.TempDir()
	kmdtest.MakeLegacyDB(t, map[string]any{"path": filepath.Join(old, legacyimport.DBName), "card_column": "device_id",
		"rows": legacyRows(t, old, "device_id", func(n int) any { return n })})
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	mine := store.Job{ID: store.NewID(), Seq: 1, Kind: store.KindJob, Device: &zero, Cmd: "mine", Cwd: "/", State: store.StateQueued, SubmittedAt: time.Now()}
	if err := st.Put(mine); err != nil {
		t.Fatal(err)
	}
	if _, err := legacyimport.ImportInto(dir, old, opts()); !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "stop queued") {
		t.Fatalf("import while the store is open: %v", err)
	}
	st.Close()

	rep, err := legacyimport.ImportInto(dir, filepath.Join(old, legacyimport.DBName), opts())
	if err != nil || rep.Queued != 4 || rep.Finished != 2 {
		t.Fatalf("ImportInto: %+v %v", rep, err)
	}
	if _, err := legacyimport.ImportInto(dir, old, opts()); !errors.Is(err, legacyimport.ErrAlreadyImported) {
		t.Fatalf("a second import: %v", err)
	}
	st, err = store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	active, _ := st.Active()
	if len(active) != 5 || active[0].ID != mine.ID || active[1].Seq <= mine.Seq || active[1].ID[:8] != "aaaa0003" {
		t.Fatalf("active after import: %+v", active)
	}
}

// TestImport_ResetsStopsAndMissingOutput: reset rows stay resets (a queued
// one carries its card's boot, so queued retries it only on that boot), a
// job stopped on request is killed, a lost output file is noted, an id
// that is not hex gets a new one, and a card that is not a number stops
// the import.
func TestImport_ResetsStopsAndMissingOutput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rows := []map[string]any{
		{"id": "ffff0001", "cmd": "", "mode": "reset", "status": "done", "exit_code": 0, "device_id": 1, "submitted": 1.0, "started_at": 2.0, "finished_at": 3.0},
		{"id": "ffff0002", "cmd": "", "mode": "reset", "status": "queued", "device_id": 1, "submitted": 4.0},
		{"id": "ffff0003", "cmd": "sleep 9", "mode": "run", "status": "done", "exit_code": -2, "stop_requested_at": 5.0,
			"device_id": 0, "submitted": 4.0, "started_at": 4.5, "finished_at": 6.0, "output_file": filepath.Join(dir, "gone", "output")},
		{"id": "job-with-dashes", "cmd": "true", "status": "queued", "device_id": "0", "submitted": 7.0},
	}
	kmdtest.MakeLegacyDB(t, map[string]any{"path": filepath.Join(dir, legacyimport.DBName), "card_column": "device_id", "rows": rows,
		"device_state": []map[string]any{{"device_id": 1, "state": "healthy", "boot_id": "boot-of-the-reset"}}})
	rep, done, err := legacyimport.ImportOnStart(dir, opts())
	if err != nil || !done || rep.Resets != 1 || rep.MissingOutput != 1 || len(rep.Renamed) != 1 || rep.Renamed["job-with-dashes"] == "" {
		t.Fatalf("ImportOnStart: %+v %v %v", rep, done, err)
	}
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	get := func(prefix string) store.Job {
		ids, _ := st.Match(prefix, 2)
		if len(ids) != 1 {
			t.Fatalf("%s matches %v", prefix, ids)
		}
		j, _ := st.Job(ids[0])
		return j
	}
	if j := get("ffff0001"); j.Kind != store.KindReset || j.Outcome != store.OutcomeSuccess || j.Cmd != "reset card 1" {
		t.Fatalf("finished reset %+v", j)
	}
	if j := get("ffff0002"); j.Kind != store.KindReset || j.State != store.StateQueued || j.BootID != "boot-of-the-reset" {
		t.Fatalf("queued reset %+v", j)
	}
	if j := get("ffff0003"); j.Outcome != store.OutcomeKilled || *j.ExitCode != -2 || !strings.Contains(j.LogError, "output not imported") {
		t.Fatalf("stopped job %+v", j)
	}
	if j := get(rep.Renamed["job-with-dashes"]); j.Cmd != "true" || j.State != store.StateQueued {
		t.Fatalf("renamed job %+v", j)
	}

	bad := t.TempDir()
	kmdtest.MakeLegacyDB(t, map[string]any{"path": filepath.Join(bad, legacyimport.DBName), "card_column": "device", "card_type": "TEXT",
		"rows": []map[string]any{{"id": "abcdef01", "cmd": "true", "status": "queued", "device": "card-one", "submitted": 1.0}}})
	if _, _, err := legacyimport.ImportOnStart(bad, opts()); err == nil || !strings.Contains(err.Error(), `"card-one" is not a card number`) {
		t.Fatalf("a card that is not a number: %v", err)
	}
}
