package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/defaults"
)

func TestJobStatus(t *testing.T) {
	for code, want := range map[int]int{0: 0, 3: 3, 255: 255, 300: 255, -1: 129, -2: 130, -9: 137, -15: 143, -127: 255, -200: 255} {
		if got := jobStatus(code); got != want {
			t.Errorf("jobStatus(%d) = %d, want %d", code, got, want)
		}
	}
}

func TestParseEnv(t *testing.T) {
	env, err := parseEnv([]string{"A=1", "_b2=x=y", "EMPTY="})
	if err != nil || env["A"] != "1" || env["_b2"] != "x=y" || env["EMPTY"] != "" || len(env) != 3 {
		t.Fatalf("parseEnv = %v, %v", env, err)
	}
	for _, bad := range []string{"", "=1", "1A=1", "A-B=1", "A B=1", "NOEQ", "TT_QUEUE_DEVICE=1", "É=1"} {
		if _, err := parseEnv([]string{bad}); err == nil || exitCodeOf(err) != ExitUsage {
			t.Errorf("parseEnv(%q) = %v, want a usage error", bad, err)
		}
	}
}

func exitCodeOf(err error) int {
	if e, ok := err.(*Error); ok {
		return e.Code
	}
	return -1
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"90": 90 * time.Second, "0.25": 250 * time.Millisecond, "10m": 10 * time.Minute, "1h30m": 90 * time.Minute, "0": 0} {
		if got, err := parseDuration(in); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "-1s", "soon", "NaN", "1e99"} {
		if _, err := parseDuration(bad); err == nil {
			t.Errorf("parseDuration(%q) accepted", bad)
		}
	}
}

func TestFmtDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0s", 300 * time.Millisecond: "300ms", 45 * time.Second: "45s",
		80 * time.Second: "1m20s", 2*time.Hour + 5*time.Minute: "2h05m", -time.Second: "0s"} {
		if got := fmtDuration(d); got != want {
			t.Errorf("fmtDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"/a/b.py": "/a/b.py", "a b": "'a b'", "it's": `'it'\''s'`, "": "''", "$HOME": "'$HOME'"} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBaseURL(t *testing.T) {
	dir := t.TempDir()
	a := &App{Globals: &Globals{}, stateDir: dir}
	cases := []struct {
		host string
		port int
		want string
	}{
		{"", 0, defaults.URL},
		{"", 6000, "http://127.0.0.1:6000"},
		{"localhost", 0, "http://localhost:5741"},
		{"::1", 7000, "http://[::1]:7000"},
		{"http://127.0.0.1:5800/", 0, "http://127.0.0.1:5800"},
		{"http://127.0.0.1:5800", 5900, "http://127.0.0.1:5900"},
	}
	for _, c := range cases {
		a.Host, a.Port = c.host, c.port
		if got, err := a.baseURL(); err != nil || got != c.want {
			t.Errorf("host %q port %d: %q, %v; want %q", c.host, c.port, got, err, c.want)
		}
	}
	// The address file is for HTTP clients; the CLI never follows it to a
	// TCP port that a stranger may hold while queued is down.
	api.WriteAddress(dir, "http://127.0.0.1:4242")
	a.Host, a.Port = "", 0
	if got, _ := a.baseURL(); got != defaults.URL {
		t.Errorf("with an address file: %q; want it ignored", got)
	}
	for _, bad := range []struct {
		host string
		port int
	}{{"ftp://x", 0}, {"http://", 0}, {"", 70000}, {"", -1}} {
		a.Host, a.Port = bad.host, bad.port
		if _, err := a.baseURL(); exitCodeOf(err) != ExitUsage {
			t.Errorf("host %q port %d: %v, want a usage error", bad.host, bad.port, err)
		}
	}
}

func TestStoreScript_PrivateAndPruned(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "scripts")
	now := time.Now()
	first, err := storeScript(dir, []byte("print(1)"), 30, now)
	if err != nil {
		t.Fatal(err)
	}
	old := now.Add(-31 * 24 * time.Hour)
	os.Chtimes(first, old, old)
	other := filepath.Join(dir, "keep-me.txt")
	os.WriteFile(other, nil, 0o600)
	os.Chtimes(other, old, old)
	second, err := storeScript(dir, []byte("print(2)"), 30, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Fatalf("a 31-day-old script survived: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("a file that is not a stored script was pruned: %v", err)
	}
	if b, _ := os.ReadFile(second); string(b) != "print(2)" {
		t.Fatalf("stored %q", b)
	}
	// A file where the directory should be fails at once.
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o600)
	if _, err := storeScript(file, []byte("x"), 30, now); err == nil {
		t.Fatal("storing under a regular file succeeded")
	}
}

// TestWriteStatus renders every kind of card state the daemon reports,
// including the reset, dead and foreign-holder fields.
func TestWriteStatus(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	started := now.Add(-80 * time.Second)
	dead := now.Add(-2 * time.Minute)
	st := api.Status{
		Cards: []api.CardStatus{
			{DeviceID: "0", State: "healthy", Worker: "running",
				Current:          &api.JobSummary{ID: "3f2a1c9e0000000000000000000000aa", Cmd: "python3 train.py --epochs 10 --batch 64 --lr 0.001", StartedAt: &started, ClientID: "alice"},
				Pending:          []api.JobSummary{{ID: "b1"}, {ID: "b2"}},
				EstimatedWaitSec: 190,
				LastReset:        &api.ResetInfo{JobID: "77aa", State: "done", Result: "ok", At: now.Add(-12 * time.Minute)},
				Foreign: []api.Holder{{PID: 4242, FriendlyName: "python3", CommandLine: "python3 rogue.py"},
					{PID: 4377, FriendlyName: "sleep", CommandLine: "sleep 120", ClaimedJobID: "3fed0000000000000000000000000000"}},
			},
			{DeviceID: "1", State: "dead", Worker: "stopped", DeadReason: "health check failed: exit 1", DeadSince: &dead,
				LastReset: &api.ResetInfo{JobID: "88bb", State: "done", Result: "failed", Detail: "health check exited 1", At: dead}},
			{DeviceID: "2", State: "resetting", Worker: "paused: foreign holder pid 7", PausedReason: "foreign holder pid 7 (x)",
				Reset: &api.ResetInfo{JobID: "99cc", State: "running", At: now.Add(-5 * time.Second)}, ForeignError: "reading pids: EIO"},
		},
		Queued: 2, MaxQueued: 1000,
		Persistence: api.Persistence{OK: false, Error: "no space left on device", Since: &dead, HeldRecords: 3, Attempts: 7},
		Retention:   api.Retention{Warning: "deleting output: EIO"},
		Warnings:    []string{"pid 99 of an interrupted job would not die"},
	}
	var plain, coloured bytes.Buffer
	writeStatus(&plain, st, "unix:///s", now, false)
	writeStatus(&coloured, st, "unix:///s", now, true)
	out := plain.String()
	for _, want := range []string{
		"queued at unix:///s\nCARD  STATE      WORKER   CURRENT                                    OWNER  RUNTIME",
		"0     healthy    running  3f2a1c9e python3 train.py --epochs 10 ...  alice  1m20s    2       ~3m        ok, 12m00s ago     2",
		"1     dead       stopped  -                                          -      -        0       -          failed, 2m00s ago  0",
		"failed, 2m00s ago",
		"2     resetting  paused",
		"running now",
		"card 0: held outside the queue by pid 4242 python3: python3 rogue.py",
		"card 0: held outside the queue by pid 4377 sleep (claims job 3fed0000, unproven): sleep 120",
		"card 1: dead since", "health check failed: exit 1; new jobs are refused until `tt-device-queue reset --device 1` revives it",
		"card 2: reset 99cc running for 5s",
		"card 2: paused: foreign holder pid 7 (x)",
		"card 2: holder list may be incomplete: reading pids: EIO",
		"2 of at most 1000 jobs queued",
		"warning: the store cannot be written for 2m00s: no space left on device",
		"warning: retention: deleting output: EIO",
		"warning: pid 99 of an interrupted job would not die",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("uncoloured status has escapes:\n%s", out)
	}
	for _, want := range []string{green + "healthy", red + "dead", yellow + "resetting", red + "failed, 2m00s ago", bold + "CARD"} {
		if !strings.Contains(coloured.String(), want) {
			t.Errorf("coloured status lacks %q:\n%q", want, coloured.String())
		}
	}
	// Colour never shifts the columns: stripped of escapes, both agree.
	stripped := coloured.String()
	for _, c := range []string{green, yellow, red, bold, reset} {
		stripped = strings.ReplaceAll(stripped, c, "")
	}
	if stripped != out {
		t.Errorf("colour changed the layout:\n%s\nvs\n%s", stripped, out)
	}
}

func TestDescribeReset(t *testing.T) {
	for _, c := range []struct {
		e    api.ResetEntry
		want string
	}{
		{api.ResetEntry{DeviceID: "0", ResetJobID: "r1", State: "queued", InterruptedJobID: "j1"}, "card 0: reset r1 queued; it interrupts running job j1"},
		{api.ResetEntry{DeviceID: "1", ResetJobID: "r2", State: "running", Coalesced: true}, "card 1: a reset is already running: r2 (this request joined it)"},
		{api.ResetEntry{DeviceID: "1", Skipped: true, Reason: "card 1 was reset since job j2 ran"}, "card 1: no reset: card 1 was reset since job j2 ran"},
	} {
		if got := describeReset(c.e); got != c.want {
			t.Errorf("describeReset = %q, want %q", got, c.want)
		}
	}
}

// TestFmtEstimate rounds estimates to what they can mean.
func TestFmtEstimate(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{1234 * time.Millisecond, "a few seconds"},
		{47 * time.Second, "~45s"},
		{3*time.Minute + 10*time.Second, "~3m"},
		{59*time.Minute + 40*time.Second, "~60m"},
		{77 * time.Minute, "~1h20m"},
	} {
		if got := fmtEstimate(c.d); got != c.want {
			t.Errorf("fmtEstimate(%s) = %q, want %q", c.d, got, c.want)
		}
	}
	if got := fmtWait(0); got != "none" {
		t.Errorf("fmtWait(0) = %q", got)
	}
	if got := runEstimate(12.3456, false); !strings.Contains(got, "unknown") {
		t.Errorf("a never-seen command's run estimate: %q", got)
	}
}
