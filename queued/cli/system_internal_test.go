package cli

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

func TestUnixSocketPath(t *testing.T) {
	for raw, want := range map[string]string{
		"unix:///run/tt-device-queue/queued.sock": "/run/tt-device-queue/queued.sock",
		"unix:///tmp//q/../q.sock":                "/tmp/q.sock",
		"UNIX:///tmp/q.sock":                      "/tmp/q.sock",
	} {
		got, ok, err := unixSocketPath(raw)
		if err != nil || !ok || got != want {
			t.Errorf("unixSocketPath(%q) = %q, %v, %v; want %q", raw, got, ok, err, want)
		}
	}
	for _, other := range []string{"", "localhost", "http://127.0.0.1:5741", "unixhost", "unixhost:5741"} {
		if _, ok, err := unixSocketPath(other); ok || err != nil {
			t.Errorf("unixSocketPath(%q) = %v, %v; want not a unix URL", other, ok, err)
		}
	}
	for _, bad := range []string{"unix://", "unix:", "unix:/tmp/q.sock", "unix://relative", "unix://host/tmp/q.sock",
		"unix:///" + strings.Repeat("d", 110) + "/q.sock", "unix:///tmp/q.sock?x=1", "unix:///tmp/q\x00.sock"} {
		_, _, err := unixSocketPath(bad)
		if exitCodeOf(err) != ExitUsage || !strings.Contains(err.Error(), strconv.Quote(bad)) {
			t.Errorf("unixSocketPath(%q) = %v; want a usage error naming the value", bad, err)
		}
	}
}

// listenUnix listens on a socket at path until the test ends.
func listenUnix(t *testing.T, path string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
}

// staleSocket leaves a socket file nothing listens on, as a daemon that
// crashed does.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
}

// TestPickSocket: the user's own daemon when it answers, else the
// system socket, else an error naming both; sockets in temp dirs.
func TestPickSocket(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (own, sys string) {
		dir := t.TempDir()
		return filepath.Join(dir, "own.sock"), filepath.Join(dir, "system.sock")
	}
	t.Run("both answer: the own one", func(t *testing.T) {
		own, sys := setup(t)
		listenUnix(t, own)
		listenUnix(t, sys)
		if got, system, err := pickSocket(ctx, own, sys); got != own || system || err != nil {
			t.Fatalf("pickSocket = %q, %v, %v; want %q", got, system, err, own)
		}
	})
	t.Run("no own daemon: the system one", func(t *testing.T) {
		own, sys := setup(t)
		listenUnix(t, sys)
		if got, system, err := pickSocket(ctx, own, sys); got != sys || !system || err != nil {
			t.Fatalf("pickSocket = %q, %v, %v; want %q", got, system, err, sys)
		}
	})
	t.Run("own socket left by a crash: the system one", func(t *testing.T) {
		own, sys := setup(t)
		staleSocket(t, own)
		listenUnix(t, sys)
		if got, system, err := pickSocket(ctx, own, sys); got != sys || !system || err != nil {
			t.Fatalf("pickSocket = %q, %v, %v; want %q", got, system, err, sys)
		}
	})
	t.Run("neither: both named", func(t *testing.T) {
		own, sys := setup(t)
		staleSocket(t, own)
		_, _, err := pickSocket(ctx, own, sys)
		if exitCodeOf(err) != ExitUnreachable {
			t.Fatalf("pickSocket = %v; want exit 1 (unreachable)", err)
		}
		msg := err.Error()
		for _, want := range []string{"unix://" + own, "connection refused", "left over from a stop or a crash",
			"unix://" + sys, "no such file", "systemctl --user start queued", "TT_DEVICE_URL=unix://"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the error lacks %q:\n%s", want, msg)
			}
		}
		if !errors.Is(err, syscall.ECONNREFUSED) || !errors.Is(err, syscall.ENOENT) {
			t.Errorf("the error does not carry both causes: %v", err)
		}
	})
	t.Run("a cancelled wait is not a missing daemon", func(t *testing.T) {
		own, sys := setup(t)
		cctx, cancel := context.WithCancelCause(ctx)
		cancel(errInterrupted)
		if _, _, err := pickSocket(cctx, own, sys); !errors.Is(err, errInterrupted) {
			t.Fatalf("pickSocket = %v; want interrupted", err)
		}
	})
}

func TestDaemonLine(t *testing.T) {
	alice := &api.Caller{UID: 1001, User: "alice"}
	for _, c := range []struct {
		st   api.Status
		want string
	}{
		{api.Status{Version: "v0.9.0", Mode: "system", Caller: alice}, "queued v0.9.0 (system mode) at unix:///s; you are alice (uid 1001)"},
		{api.Status{Version: "v0.9.0", Mode: "system", Caller: &api.Caller{UID: 0, User: "root", Admin: true}}, "queued v0.9.0 (system mode) at unix:///s; you are root (uid 0), an admin"},
		{api.Status{Version: "v0.9.0", Mode: "system", Caller: &api.Caller{UID: 1002}}, "queued v0.9.0 (system mode) at unix:///s; you are uid 1002"},
		{api.Status{Version: "v0.9.0", Mode: "system"}, "queued v0.9.0 (system mode) at unix:///s"},
		{api.Status{Version: "v0.9.0", Mode: "user", Caller: alice}, "queued v0.9.0 at unix:///s"},
		{api.Status{Version: "v0.9.0"}, "queued v0.9.0 at unix:///s"},
		{api.Status{}, "queued at unix:///s"},
	} {
		if got := daemonLine(c.st, "unix:///s"); got != c.want {
			t.Errorf("daemonLine(%+v) = %q, want %q", c.st, got, c.want)
		}
	}
}

// TestOwnerShown: status, job and list show the owner, falling back to
// the client id for jobs recorded without one.
func TestOwnerShown(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	uid := uint32(1001)
	started := now.Add(-time.Minute)
	st := api.Status{Mode: "system", Persistence: api.Persistence{OK: true}, Cards: []api.CardStatus{
		{DeviceID: "0", State: "healthy", Worker: "running",
			Current: &api.JobSummary{ID: "4d5e6f0000", Cmd: "train", Owner: "bob", ClientID: "laptop", StartedAt: &started},
			Pending: []api.JobSummary{{ID: "a1", Owner: "alice"}, {ID: "a2", Owner: "carol"}, {ID: "a3", Owner: "alice"}}},
		{DeviceID: "1", State: "healthy", Worker: "running",
			Current: &api.JobSummary{ID: "77aa000000", Cmd: "old", ClientID: "dave", StartedAt: &started}},
		{DeviceID: "2", State: "healthy", Worker: "idle"},
	}}
	var b bytes.Buffer
	writeStatus(&b, st, "unix:///s", now, false)
	out := b.String()
	for _, want := range []string{"CARD  STATE    WORKER   CURRENT         OWNER  RUNTIME",
		"0     healthy  running  4d5e6f00 train  bob    1m00s", "1     healthy  running  77aa0000 old    dave   1m00s", "2     healthy  idle     -               -      -",
		"card 0: queued for alice (2), carol (1)"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}

	var f bytes.Buffer
	a := &App{Streams: Streams{Out: &f}}
	a.printFields(jobFields(api.Job{ID: "4d5e6f", State: "queued", Owner: "alice", OwnerUID: &uid, ClientID: "laptop", SubmittedAt: now}, now))
	if !strings.Contains(f.String(), "owner      alice (uid 1001)\n") || !strings.Contains(f.String(), "client     laptop\n") {
		t.Errorf("job lacks the owner or the client:\n%s", f.String())
	}
	for _, c := range []struct {
		j    api.Job
		want string
	}{{api.Job{OwnerUID: &uid}, "uid 1001"}, {api.Job{Owner: "alice"}, "alice"}} {
		f.Reset()
		a.printFields(jobFields(c.j, now))
		if !strings.Contains(f.String(), "owner      "+c.want+"\n") {
			t.Errorf("job %+v: want owner %q:\n%s", c.j, c.want, f.String())
		}
	}
	f.Reset()
	a.printFields(jobFields(api.Job{ClientID: "laptop"}, now))
	if strings.Contains(f.String(), "owner") {
		t.Errorf("a job without an owner shows one:\n%s", f.String())
	}

	var l bytes.Buffer
	writeList(&l, []api.Job{
		{ID: "aaaaaaaa11", DeviceID: "0", State: "queued", Owner: "alice", ClientID: "laptop", SubmittedAt: now},
		{ID: "bbbbbbbb22", DeviceID: "0", State: "queued", ClientID: "dave", SubmittedAt: now},
		{ID: "cccccccc33", DeviceID: "0", State: "queued", SubmittedAt: now},
	}, now, false)
	for _, want := range []string{"aaaaaaaa  0     queued  -    alice", "bbbbbbbb  0     queued  -    dave", "cccccccc  0     queued  -    -"} {
		if !strings.Contains(l.String(), want) {
			t.Errorf("list lacks %q:\n%s", want, l.String())
		}
	}
}

func TestDescribeReset_WaitsForAnotherUsersJob(t *testing.T) {
	for _, c := range []struct {
		e    api.ResetEntry
		want string
	}{
		{api.ResetEntry{DeviceID: "0", ResetJobID: "1a2b3c", State: "queued", WaitsForJobID: "4d5e6f", WaitsForOwner: "bob"},
			"card 0: reset 1a2b3c queued behind job 4d5e6f of bob (only its owner or an admin may interrupt it)"},
		{api.ResetEntry{DeviceID: "1", ResetJobID: "1a2b3c", State: "queued", WaitsForJobID: "4d5e6f"},
			"card 1: reset 1a2b3c queued behind job 4d5e6f of another user (only its owner or an admin may interrupt it)"},
	} {
		if got := describeReset(c.e); got != c.want {
			t.Errorf("describeReset = %q, want %q", got, c.want)
		}
	}
}

// TestSocketTrouble: a refused connection on the shared socket points at
// its group, on one's own socket at the state directory's owner.
func TestSocketTrouble(t *testing.T) {
	deniedErr := &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.EACCES)}
	if got := socketTrouble(deniedErr, viaSystem); !strings.HasPrefix(got, "connect: permission denied") || !strings.Contains(got, "TT_DEVICE_SOCKET_GROUP") {
		t.Errorf("system socket, EACCES: %q", got)
	}
	if got := socketTrouble(deniedErr, viaOwn); !strings.Contains(got, "belongs to someone else") {
		t.Errorf("own socket, EACCES: %q", got)
	}
	e := &noDaemonError{own: "/o", system: "/s", ownErr: os.ErrNotExist, sysErr: deniedErr}
	if strings.Contains(e.Error(), "not running") {
		t.Errorf("a socket the caller may not use is called not running: %s", e.Error())
	}
}

// TestResetQuestion: before a reset of every card on a shared daemon, a
// non-admin is told which running jobs are other users' and so finish
// first, instead of being told they are interrupted.
func TestResetQuestion(t *testing.T) {
	alice, bob := uint32(1001), uint32(1002)
	st := api.Status{Mode: "system", Caller: &api.Caller{UID: alice, User: "alice"}, Cards: []api.CardStatus{
		{DeviceID: "0", Current: &api.JobSummary{ID: "aaaaaaaa11", Cmd: "mine", Owner: "alice", OwnerUID: &alice}},
		{DeviceID: "1", Current: &api.JobSummary{ID: "bbbbbbbb22", Cmd: "theirs", Owner: "bob", OwnerUID: &bob}},
		{DeviceID: "2"},
	}}
	got := resetQuestion(st, false)
	for _, want := range []string{"This resets every card (0, 1, 2).\n",
		"It interrupts these running jobs:\n  card 0: job aaaaaaaa of alice  mine\n",
		"These running jobs of other users finish first (only their owner or an admin may interrupt them):\n  card 1: job bbbbbbbb of bob  theirs\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("question lacks %q:\n%s", want, got)
		}
	}
	st.Caller.Admin = true
	if got := resetQuestion(st, false); !strings.Contains(got, "It interrupts these running jobs:\n  card 0: job aaaaaaaa of alice  mine\n  card 1: job bbbbbbbb of bob  theirs\n") {
		t.Errorf("an admin's question:\n%s", got)
	}
	if got := resetQuestion(st, true); !strings.Contains(got, "These running jobs finish first (--no-interrupt):\n  card 0") {
		t.Errorf("--no-interrupt:\n%s", got)
	}
	// A user-mode daemon: every job is the caller's, no owner shown.
	st = api.Status{Cards: []api.CardStatus{{DeviceID: "0", Current: &api.JobSummary{ID: "aaaaaaaa11", Cmd: "mine", ClientID: "alice"}}}}
	if got := resetQuestion(st, false); !strings.Contains(got, "It interrupts these running jobs:\n  card 0: job aaaaaaaa  mine\n") {
		t.Errorf("user mode:\n%s", got)
	}
	if got := resetQuestion(api.Status{Cards: []api.CardStatus{{DeviceID: "0"}}}, false); !strings.Contains(got, "No job is running.\n") {
		t.Errorf("idle:\n%s", got)
	}
}
