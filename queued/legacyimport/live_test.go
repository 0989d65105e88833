package legacyimport_test

import (
	"bufio"
	"database/sql"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/queued/legacyimport"
	"github.com/ttkit/ttkit/queued/store"
)

// live is a running stand-in for the Python server
// (testdata/python-tool/live_server.py) using a database.
type live struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	acks []string
	done chan struct{}
}

// startLive builds nothing: db must exist. mode is hold, idle or busy
// (see the script); port 0 answers on no port. asServer runs the script
// as a server.py beside a queue_core.py, with TT_DEVICE_LOG_DIR the
// database's directory, as the real tool runs.
func startLive(t *testing.T, db string, port int, mode string, asServer bool) *live {
	t.Helper()
	return startLiveAs(t, db, port, mode, asServer, false)
}

// startLiveAs is startLive; asModule runs the stand-in as the real
// server.py would be as `python3 -m server` from its own directory (a
// copy elsewhere than the import's directory).
func startLiveAs(t *testing.T, db string, port int, mode string, asServer, asModule bool) *live {
	t.Helper()
	script := filepath.Join(kmdtest.Testdata(t), "python-tool", "live_server.py")
	if asServer || asModule {
		repo := t.TempDir()
		body, err := os.ReadFile(script)
		if err != nil {
			t.Fatal(err)
		}
		script = filepath.Join(repo, "server.py")
		for name, b := range map[string][]byte{"server.py": body, "queue_core.py": []byte("# stand-in\n")} {
			if err := os.WriteFile(filepath.Join(repo, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	l := &live{cmd: exec.Command("python3", script, db, itoa(port), mode), done: make(chan struct{})}
	if asModule {
		l.cmd = exec.Command("python3", "-m", "server", db, itoa(port), mode)
		l.cmd.Dir = filepath.Dir(script)
	}
	l.cmd.Env = append(os.Environ(), "TT_DEVICE_LOG_DIR="+filepath.Dir(db))
	out, err := l.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	l.cmd.Stderr = os.Stderr
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		defer close(l.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			switch f := strings.Fields(sc.Text()); {
			case len(f) == 1 && f[0] == "ready":
				close(ready)
			case len(f) == 2 && f[0] == "ack":
				l.mu.Lock()
				l.acks = append(l.acks, f[1])
				l.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { l.stop(t) })
	select {
	case <-ready:
	case <-l.done:
		t.Fatal("the stand-in Python server exited at start")
	case <-time.After(20 * time.Second):
		t.Fatal("the stand-in Python server is not ready after 20s")
	}
	return l
}

// stop ends the server cleanly (SIGTERM) and waits for it.
func (l *live) stop(t *testing.T) {
	if l.cmd.ProcessState != nil {
		return
	}
	l.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-l.done:
	case <-time.After(20 * time.Second):
		l.cmd.Process.Kill()
		<-l.done
		t.Error("the stand-in Python server did not stop on SIGTERM")
	}
	l.cmd.Wait()
}

func (l *live) acked() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.acks...)
}

func itoa(n int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + fmtInt(n)) }

func fmtInt(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// freePort is a loopback port nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// sideFiles lists which of the database's -wal and -shm exist.
func sideFiles(db string) []string {
	var out []string
	for _, s := range []string{"-wal", "-shm"} {
		if _, err := os.Lstat(db + s); err == nil {
			out = append(out, s)
		}
	}
	return out
}

// TestImport_RefusesADatabaseInUse: whichever way the Python tool is
// alive (holding the database, idle but answering on its port, idle and
// answering nowhere we look but running on the directory), the import is
// refused with ErrInUse and a message that says to stop it, the tool's
// files are left as they were, and no store appears.
func TestImport_RefusesADatabaseInUse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, mode               string
		port, asServer, asModule bool
		want                     string
	}{
		{"holding the database", "hold", false, false, false, "has jobs.sqlite3 open"},
		{"idle, answering on its port", "idle", true, false, false, "answers on 127.0.0.1:"},
		{"idle server.py on the directory", "idle", false, true, false, "runs as process"},
		// Started as a module, from a copy of the tool elsewhere, on a
		// port the import is not told: it ran the same jobs as queued.
		{"idle python3 -m server from another path", "idle", false, false, true, "runs as process"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			db := filepath.Join(dir, legacyimport.DBName)
			kmdtest.MakeLegacyDB(t, map[string]any{"path": db, "rows": legacyRows(t, dir, "", func(int) any { return nil })})
			port := 0
			if tc.port {
				port = freePort(t)
			}
			startLiveAs(t, db, port, tc.mode, tc.asServer, tc.asModule)
			sides := sideFiles(db)
			before := fingerprint(t, dir)
			o := opts()
			o.Port = port
			_, done, err := legacyimport.ImportOnStart(dir, o)
			if !errors.Is(err, legacyimport.ErrInUse) || done || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "stop the Python tt-device-queue first") {
				t.Fatalf("ImportOnStart with the Python tool %s: %v (imported %v); want ErrInUse naming %q", tc.name, err, done, tc.want)
			}
			if after := sideFiles(db); strings.Join(after, ",") != strings.Join(sides, ",") {
				t.Fatalf("the import changed the tool's side files: %v -> %v", sides, after)
			}
			if after := fingerprint(t, dir); !maps(before, after) {
				t.Fatalf("the import changed the tool's files: %v -> %v", before, after)
			}
			if _, err := os.Stat(filepath.Join(dir, store.FileName)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused import left %s: %v", store.FileName, err)
			}
		})
	}
}

// TestImport_BusyToolLosesNothing: imports tried again and again while
// the tool commits a job every few milliseconds are all refused, and
// every job the tool acknowledged is in its database after it stops
// cleanly (an import once removed the live tool's -wal and -shm, and
// with them acknowledged jobs).
func TestImport_BusyToolLosesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, legacyimport.DBName)
	kmdtest.MakeLegacyDB(t, map[string]any{"path": db})
	l := startLive(t, db, 0, "busy", true)
	// At least 40 imports, and on until the tool has committed ten jobs
	// among them: a refused import takes a few ms, a commit on a slow disk
	// longer, so a fixed count alone could end before the tool did much.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < 40 || len(l.acked()) < 10; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("the tool acknowledged %d jobs in 30s of imports", len(l.acked()))
		}
		if _, err := legacyimport.ImportInto(t.TempDir(), db, opts()); !errors.Is(err, legacyimport.ErrInUse) {
			t.Fatalf("import %d while the tool commits jobs: %v, want ErrInUse", i, err)
		}
	}
	l.stop(t)
	acked := l.acked()
	if len(acked) < 10 {
		t.Fatalf("the tool acknowledged only %d jobs", len(acked))
	}
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, id := range acked {
		var n int
		if err := conn.QueryRow("SELECT count(*) FROM jobs WHERE id = ?", id).Scan(&n); err != nil || n != 1 {
			t.Fatalf("acknowledged job %s is not in the database after a clean stop (%d rows, %v)", id, n, err)
		}
	}
	rep, err := legacyimport.ImportInto(t.TempDir(), db, opts())
	if err != nil || rep.Queued < len(acked) {
		t.Fatalf("import of the stopped tool's database: %+v %v; want at least the %d acknowledged queued", rep, err, len(acked))
	}
}

// TestImportOnStart_NotWhileLiveAndAgainWhenChanged: queued started
// while the tool runs on its directory imports nothing and writes no
// store; started once it stopped, it imports; and when the database
// changes afterwards (the tool ran again and finished a queued job), the
// next start reads it again: that job becomes the tool's history and is
// not run a second time, while an unchanged database is not read again.
func TestImportOnStart_NotWhileLiveAndAgainWhenChanged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, legacyimport.DBName)
	kmdtest.MakeLegacyDB(t, map[string]any{"path": db, "rows": legacyRows(t, dir, "", func(int) any { return nil })})
	l := startLive(t, db, 0, "idle", true)
	if _, done, err := legacyimport.ImportOnStart(dir, opts()); !errors.Is(err, legacyimport.ErrInUse) || done {
		t.Fatalf("start while the tool runs: %v (imported %v)", err, done)
	}
	if _, err := os.Stat(filepath.Join(dir, store.FileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a start while the tool runs wrote %s: %v", store.FileName, err)
	}
	l.stop(t)
	if rep, done, err := legacyimport.ImportOnStart(dir, opts()); err != nil || !done || rep.Queued != 4 {
		t.Fatalf("start after the tool stopped: %+v %v %v", rep, done, err)
	}
	if _, done, err := legacyimport.ImportOnStart(dir, opts()); err != nil || done {
		t.Fatalf("a start with the database unchanged imported again: %v %v", done, err)
	}

	// The tool runs again and finishes aaaa0003, which queued has not run.
	conn, err := sql.Open("sqlite", "file:"+db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(`UPDATE jobs SET status='done', exit_code=0, started_at=1700000100, finished_at=1700000118 WHERE id='aaaa0003'`); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	rep, done, err := legacyimport.ImportOnStart(dir, opts())
	if err != nil || !done || rep.Updated < 1 {
		t.Fatalf("a start after the database changed: %+v %v %v; want it read again, the finished job updated", rep, done, err)
	}
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ids, _ := st.Match("aaaa0003", 2)
	j, _ := st.Job(ids[0])
	if j.State != store.StateDone || j.Outcome != store.OutcomeSuccess || !j.FinishedAt.Equal(time.Unix(1700000118, 0)) {
		t.Fatalf("the job the tool finished after the import is %s/%s, want done/success as the tool recorded it", j.State, j.Outcome)
	}
	active, _ := st.Active()
	if len(active) != 3 {
		t.Fatalf("%d jobs queued after the second import, want 3", len(active))
	}
}

// TestImport_RefusesAnyProcessHoldingTheDatabase: a process that is not
// the Python tool at all, started from another directory, holding the
// database or its -wal open is evidence too, and the refusal names its
// pid and command line.
func TestImport_RefusesAnyProcessHoldingTheDatabase(t *testing.T) {
	t.Parallel()
	for _, file := range []string{legacyimport.DBName, legacyimport.DBName + "-wal"} {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			db := filepath.Join(dir, legacyimport.DBName)
			kmdtest.MakeLegacyDB(t, map[string]any{"path": db, "rows": legacyRows(t, dir, "", func(int) any { return nil })})
			held := filepath.Join(dir, file)
			if _, err := os.Stat(held); errors.Is(err, os.ErrNotExist) {
				if err := os.WriteFile(held, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("python3", "-c", "import sys, time; f = open(sys.argv[1], 'rb'); print('ready', flush=True); time.sleep(600)", held)
			cmd.Dir = t.TempDir()
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
				t.Fatalf("the holder said %q, %v", line, err)
			}
			_, err = legacyimport.ImportInto(t.TempDir(), db, opts())
			want := []string{"process " + itoa(cmd.Process.Pid), "python3 -c import sys", "has " + file + " open"}
			for _, w := range want {
				if !errors.Is(err, legacyimport.ErrInUse) || !strings.Contains(err.Error(), w) {
					t.Fatalf("import while another process holds %s: %v; want ErrInUse naming %q", file, err, w)
				}
			}
		})
	}
}
