package legacyimport_test

import (
	"errors"
	"github.com/ttkit/ttkit/queued/api"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/internal/usertest"
	"github.com/ttkit/ttkit/queued/legacyimport"
	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
)

// chown gives paths (not following links) to u.
func chown(t *testing.T, u usertest.User, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.Lchown(p, int(u.UID), int(u.GID)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestImport_SystemModeReadsOnlyTheOwnersFiles: root imports a user's
// crafted database into a system-mode store. Every output_file that is
// not a regular file of the user's, in a directory of the user's, that
// the user could read, is refused before anything is read from it (a
// link to root's secret, a FIFO, a device, a directory, the user's file
// in root's directory or behind a directory the user cannot enter); a
// file larger than the output limit is cut to its head and tail; the jobs
// are the user's; a reset runs in / with nothing of the row, and its
// output, which everyone may read, is not copied.
func TestImport_SystemModeReadsOnlyTheOwnersFiles(t *testing.T) {
	usertest.RequireRoot(t)
	t.Parallel()
	ana := usertest.New(t, "ttli")
	logs := filepath.Join(ana.Home, "logs-v2")
	open := usertest.OpenDir(t)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("root's secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := func(id string) string {
		d := filepath.Join(logs, id)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		chown(t, ana, logs, d)
		return filepath.Join(d, "output")
	}
	write := func(p, text string) string {
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		chown(t, ana, p)
		return p
	}
	good := write(out("aaaa0001"), "ana's output\n")
	link := out("aaaa0002")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	chown(t, ana, link)
	fifo := out("aaaa0003")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	chown(t, ana, fifo)
	dev := out("aaaa0004")
	if err := unix.Mknod(dev, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 5))); err != nil { // /dev/zero's numbers
		t.Fatal(err)
	}
	chown(t, ana, dev)
	dir := out("aaaa0005")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	chown(t, ana, dir)
	rootDir := filepath.Join(open, "roots")
	os.Mkdir(rootDir, 0o755)
	inRoots := write(filepath.Join(rootDir, "output"), "in root's directory\n")
	locked := filepath.Join(open, "locked")
	os.Mkdir(locked, 0o700)
	behind := filepath.Join(locked, "anas")
	os.Mkdir(behind, 0o700)
	chown(t, ana, behind)
	hidden := write(filepath.Join(behind, "output"), "behind a directory ana cannot enter\n")
	huge := out("aaaa0008")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("HEAD")
	f.WriteAt([]byte("TAIL"), 3<<20-4)
	f.Close()
	chown(t, ana, huge)
	resetOut := write(out("ffff0001"), "tt-smi said\n")

	done := func(id, output string) map[string]any {
		return map[string]any{"id": id, "cmd": "true", "cwd": ana.Home, "mode": "run", "status": "done", "exit_code": 0,
			"submitted": 1.0, "started_at": 1.0, "finished_at": 2.0, "output_file": output, "client_id": "ana"}
	}
	rows := []map[string]any{
		done("aaaa0001", good), done("aaaa0002", link), done("aaaa0003", fifo), done("aaaa0004", dev), done("aaaa0005", dir),
		done("aaaa0006", inRoots), done("aaaa0007", hidden), done("aaaa0008", huge),
		{"id": "ffff0001", "cmd": "[device reset] tt-smi -r", "cwd": ana.Home, "mode": "reset", "status": "done", "exit_code": 0,
			"submitted": 1.0, "started_at": 1.0, "finished_at": 2.0, "output_file": resetOut, "client_id": "system"},
		{"id": "ffff0002", "cmd": "[device reset] tt-smi -r", "cwd": ana.Home, "mode": "reset", "status": "queued", "client_id": "ana",
			"submitted": 3.0, "env_json": `{"LD_PRELOAD":"` + ana.Home + `/evil.so"}`},
		{"id": "bbbb0001", "cmd": "id -u", "cwd": ana.Home, "mode": "run", "status": "queued", "client_id": "ana", "submitted": 4.0},
	}
	db := filepath.Join(logs, legacyimport.DBName)
	kmdtest.MakeLegacyDB(t, map[string]any{"path": db, "rows": rows})
	chown(t, ana, db)

	state := t.TempDir()
	o := opts()
	o.Mode, o.MaxLogBytes = api.SystemMode, 1<<20
	type res struct {
		rep legacyimport.Report
		err error
	}
	ch := make(chan res, 1)
	go func() { r, err := legacyimport.ImportInto(state, logs, o); ch <- res{r, err} }()
	var r res
	select {
	case r = <-ch:
	case <-time.After(60 * time.Second):
		t.Fatal("the import blocked (on the FIFO or the device?)")
	}
	if r.err != nil || r.rep.Owner != ana.Name || r.rep.MissingOutput != 6 || r.rep.CutOutputs != 1 {
		t.Fatalf("import: %+v %v; want ana's, 6 outputs refused, 1 cut", r.rep, r.err)
	}
	st := openStore(t, state)
	readOut := func(j store.Job) string {
		b, err := os.ReadFile(filepath.Join(state, "output", j.ID+".log"))
		if errors.Is(err, os.ErrNotExist) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct{ id, logError, out string }{
		{"aaaa0001", "", "ana's output\n"},
		{"aaaa0002", "symbolic link", ""},
		{"aaaa0003", "not a regular file", ""},
		{"aaaa0004", "not a regular file", ""},
		{"aaaa0005", "not a regular file", ""},
		{"aaaa0006", "a directory of root", ""},
		{"aaaa0007", "permission denied", ""},
		{"ffff0001", "not imported: a reset's record is everyone's", ""},
	} {
		j := byOld(t, st, tc.id)
		if got := readOut(j); got != tc.out || !strings.Contains(j.LogError, tc.logError) || (tc.logError == "") != (j.LogError == "") {
			t.Errorf("job %s: output %q, log error %q; want %q and an error saying %q", tc.id, got, j.LogError, tc.out, tc.logError)
		}
		if j.OwnerUID == nil || *j.OwnerUID != ana.UID || j.Owner != ana.Name {
			t.Errorf("job %s is owned by %v %q, want ana", tc.id, j.OwnerUID, j.Owner)
		}
	}
	h := byOld(t, st, "aaaa0008")
	got := readOut(h)
	if h.LogBytes != 3<<20 || h.LogCutAt != 1<<19 || h.LogCutBytes != 2<<20 || !h.LogTruncated ||
		!strings.HasPrefix(got, "HEAD") || !strings.HasSuffix(got, "TAIL") || !strings.Contains(got, runner.CutMarker(2<<20)) || len(got) > 1<<20+200 {
		t.Errorf("the huge output: %d bytes copied, record %+v", len(got), h)
	}
	reset := byOld(t, st, "ffff0002")
	if reset.Kind != store.KindReset || reset.Cwd != "/" || len(reset.Env) != 0 {
		t.Errorf("the queued reset runs in %q with %v, want / and nothing of the row", reset.Cwd, reset.Env)
	}
	if j := byOld(t, st, "bbbb0001"); j.OwnerUID == nil || *j.OwnerUID != ana.UID {
		t.Errorf("the queued job is owned by %v, want ana (uid %d)", j.OwnerUID, ana.UID)
	}
	if b, _ := os.ReadFile(secret); string(b) != "root's secret\n" {
		t.Fatal("the secret changed")
	}
}

// TestImport_RefusesADatabaseNotItsOwnersToImport: the database itself
// a symbolic link; in system mode, a database of root's (its jobs would
// run as root); in user mode, another user's database (its jobs would
// run as the importer).
func TestImport_RefusesADatabaseNotItsOwnersToImport(t *testing.T) {
	usertest.RequireRoot(t)
	t.Parallel()
	ana := usertest.New(t, "ttlj")
	rows := []map[string]any{q("aaaa0001", "ana")}
	real := filepath.Join(ana.Home, legacyimport.DBName)
	kmdtest.MakeLegacyDB(t, map[string]any{"path": real, "rows": rows})
	chown(t, ana, real)
	linkDir := t.TempDir()
	link := filepath.Join(linkDir, legacyimport.DBName)
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	roots := t.TempDir()
	kmdtest.MakeLegacyDB(t, map[string]any{"path": filepath.Join(roots, legacyimport.DBName), "rows": rows})
	for _, tc := range []struct {
		name, src string
		system    bool
		want      string
	}{
		{"a symbolic link", link, true, "is a symbolic link"},
		{"root's, in system mode", roots, true, "belongs to root"},
		{"another user's, in user mode", real, false, "not to you"},
	} {
		o := opts()
		if tc.system {
			o.Mode = api.SystemMode
		}
		_, err := legacyimport.ImportInto(t.TempDir(), tc.src, o)
		if !errors.Is(err, legacyimport.ErrUnsafe) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want ErrUnsafe saying %q", tc.name, err, tc.want)
		}
	}
}

// TestImport_SystemModeRefusesADatabaseOthersCouldWrite: vera's
// database, or its WAL, is writable by her group or by everyone, so
// mallory could have written its rows; imported into the system-mode
// store they would run as vera. The import refuses it, naming the file.
func TestImport_SystemModeRefusesADatabaseOthersCouldWrite(t *testing.T) {
	usertest.RequireRoot(t)
	t.Parallel()
	vera := usertest.New(t, "ttgw")
	for _, tc := range []struct {
		name, file string
		mode       os.FileMode
	}{
		{"group-writable database", "", 0o660},
		{"world-writable database", "", 0o606},
		{"group-writable WAL", "-wal", 0o620},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := filepath.Join(vera.Home, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.Mkdir(d, 0o700); err != nil {
				t.Fatal(err)
			}
			db := filepath.Join(d, legacyimport.DBName)
			kmdtest.MakeLegacyDB(t, map[string]any{"path": db, "rows": []map[string]any{q("aaaa0001", "vera"), q("aaaa0002", "vera")}, "keep_wal": true})
			chown(t, vera, d, db, db+"-wal")
			os.Remove(db + "-shm")
			if err := os.Chmod(db+tc.file, tc.mode); err != nil {
				t.Fatal(err)
			}
			o := opts()
			o.Mode = api.SystemMode
			_, err := legacyimport.ImportInto(t.TempDir(), db, o)
			if !errors.Is(err, legacyimport.ErrUnsafe) || !strings.Contains(err.Error(), db+tc.file) || !strings.Contains(err.Error(), "chmod go-w") {
				t.Errorf("import: %v; want ErrUnsafe naming %s", err, db+tc.file)
			}
		})
	}
}
