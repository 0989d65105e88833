package cli_test

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/api"
)

// TestUnixURL_RealDaemon: TT_DEVICE_URL=unix:///path and --host
// unix:///path reach the daemon listening there, with no token, whatever
// the state directory says; status names the socket it used.
func TestUnixURL_RealDaemon(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	sock := filepath.Join(d.state, api.SocketFile)
	url := "unix://" + sock
	// Another state directory, empty: no token, no socket. The URL alone
	// must find the daemon.
	elsewhere := []string{"TT_DEVICE_LOG_DIR=" + t.TempDir()}

	r := d.runWith(append(elsewhere, "TT_DEVICE_URL="+url), "", "status")
	r.want(t, 0, []string{"CARD", " at " + url}, nil)
	if first, _, _ := strings.Cut(r.stdout, "\n"); !strings.HasPrefix(first, "queued ") || !strings.HasSuffix(first, " at "+url) {
		t.Fatalf("status's first line %q does not say which daemon answered", first)
	}
	r = d.runWith(elsewhere, "", "--host", url, "queue", "--", "echo over the socket")
	r.want(t, 0, nil, []string{"queued on card"})
	id := strings.TrimSpace(r.stdout)
	d.runWith(elsewhere, "", "--host", url, "result", id).want(t, 0, []string{"over the socket"}, nil)

	// The default, with the daemon's own state directory, is its socket.
	d.run("status").want(t, 0, []string{" at unix://" + sock}, nil)
}

// TestUnixURL_BadValues: a unix URL that is not unix:// and an absolute
// socket path is a usage error naming the value, before anything is
// dialled.
func TestUnixURL_BadValues(t *testing.T) {
	t.Parallel()
	d := &daemon{t: t, state: t.TempDir(), home: t.TempDir()}
	d.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + d.home, "TT_DEVICE_LOG_DIR=" + d.state}
	long := "unix:///" + strings.Repeat("x", 120) + "/queued.sock"
	for _, bad := range []string{"unix://relative/queued.sock", "unix://", "unix:", "unix:/run/q.sock", "UNIX://", long} {
		d.runWith([]string{"TT_DEVICE_URL=" + bad}, "", "status").want(t, 2, nil, []string{`"` + bad + `"`, "unix:///"})
		d.run("--host", bad, "status").want(t, 2, nil, []string{`"` + bad + `"`})
	}
	d.run("--help").want(t, 0, []string{"unix:///path/to/queued.sock", api.SystemSocket}, nil)
	d.run("--host", "unix:///tmp/q.sock", "--port", "5741", "status").want(t, 2, nil, []string{"unix:///tmp/q.sock", "port"})
}

// TestDefault_NeitherDaemonAnswers: with no daemon of one's own and no
// system socket, the error names both places and how to get a daemon.
func TestDefault_NeitherDaemonAnswers(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(api.SystemSocket); err == nil {
		// The selection itself is unit-tested with sockets in temp dirs
		// (TestPickSocket); this host really has a system queue.
		t.Skipf("%s exists on this host", api.SystemSocket)
	}
	d := &daemon{t: t, state: t.TempDir(), home: t.TempDir()}
	d.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + d.home, "TT_DEVICE_LOG_DIR=" + d.state}
	own := "unix://" + filepath.Join(d.state, api.SocketFile)
	d.run("status").want(t, 1, nil, []string{own, "unix://" + api.SystemSocket, "no such file", "systemctl --user start queued", "TT_DEVICE_URL=unix://"})
}

// fakeQueued is a server speaking queued's API on a Unix socket, for what
// a user-mode daemon never says: a system-mode status with its caller,
// and the 403 a shared daemon gives for another user's job.
func fakeQueued(t *testing.T, status api.Status) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "queued.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	refuse := func(w http.ResponseWriter, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		json.NewEncoder(w).Encode(api.ErrorResponse{Error: msg})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(status)
	})
	mux.HandleFunc("GET /job/{id}", func(w http.ResponseWriter, r *http.Request) {
		refuse(w, "job "+r.PathValue("id")+" belongs to bob;\nonly its owner or an admin may see it")
	})
	mux.HandleFunc("POST /kill", func(w http.ResponseWriter, r *http.Request) {
		var k api.KillRequest
		json.NewDecoder(r.Body).Decode(&k)
		refuse(w, "job "+k.JobID+" belongs to bob; only its owner or an admin may kill it")
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// TestSystemMode_StatusSaysWhoAndRefusalsExit1: status against a
// system-mode daemon says so and who the caller is; a 403 prints the
// daemon's message on one line and exits 1 (refused).
func TestSystemMode_StatusSaysWhoAndRefusalsExit1(t *testing.T) {
	t.Parallel()
	st := api.Status{Version: "v0.9.0", Mode: "system", Caller: &api.Caller{UID: 1001, User: "alice"}, MaxQueued: 1000,
		Persistence: api.Persistence{OK: true},
		Cards: []api.CardStatus{{DeviceID: "0", State: "healthy", Worker: "running",
			Current: &api.JobSummary{ID: "4d5e6f00000000000000000000000000", Cmd: "python3 train.py", Owner: "bob", ClientID: "bobs-laptop"}}}}
	sock := fakeQueued(t, st)
	d := &daemon{t: t, state: t.TempDir(), home: t.TempDir()}
	d.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + d.home, "TT_DEVICE_LOG_DIR=" + d.state, "TT_DEVICE_URL=unix://" + sock}

	r := d.run("status")
	r.want(t, 0, []string{"queued v0.9.0 (system mode) at unix://" + sock + "; you are alice (uid 1001)\n", "OWNER", "bob"}, nil)
	d.run("--json", "status").want(t, 0, []string{`"mode":"system"`, `"caller":{"uid":1001,"user":"alice"}`}, nil)

	for _, args := range [][]string{{"job", "4d5e6f"}, {"kill", "4d5e6f"}} {
		r := d.run(args...)
		r.want(t, 1, nil, []string{"job 4d5e6f belongs to bob; only its owner or an admin may"})
		if strings.Count(strings.TrimRight(r.stderr, "\n"), "\n") != 0 {
			t.Errorf("%v: the refusal is not one line: %v", args, r)
		}
	}
}
