package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ttkit/ttkit/internal/usertest"
	"github.com/ttkit/ttkit/queued/api"
)

// nasty is what another user's command, client id, directory or
// environment value may carry to whoever lists the queue: clear the
// screen, colour, set the window title (OSC, ended by BEL), DEL, and the
// one-character CSI of C1 (U+009B), which some terminals obey as ESC [,
// and the bidirectional-text controls that reorder what follows them on
// the line, so a command reads other than it runs (issue 38, finding 8):
// right-to-left override U+202E, the isolates U+2066-U+2069, the marks
// U+200E, U+200F and U+061C, and the line separator U+2028.
const nasty = "\x1b[2J\x1b[31mFAKE\x1b]0;title\x07 \x7f \u009b31m \u202eevil\u202c \u2066\u2067\u2068\u2069 \u200e\u200f\u061c \u2028"

// escaped is nasty as the CLI prints it.
const escaped = `\x1b[2J\x1b[31mFAKE\x1b]0;title\x07 \x7f \u009b31m \u202eevil\u202c \u2066\u2067\u2068\u2069 \u200e\u200f\u061c \u2028`

// clean fails the test when s holds anything a terminal would act on:
// a control character other than newline, DEL, a C1 control, a
// bidirectional-text control, or bytes that are not UTF-8.
func clean(t *testing.T, what, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Errorf("%s is not UTF-8: %q", what, s)
	}
	for _, r := range s {
		if (r < 0x20 && r != '\n') || (r >= 0x7f && r <= 0x9f) || strings.ContainsRune("\u061c\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069", r) {
			t.Errorf("%s holds control character %U: %q", what, r, s)
			return
		}
	}
}

// Every field another user chooses is printed with its control characters
// escaped, as ps does; --json keeps the exact value.
func TestTerminal_ControlCharactersAreEscaped(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	cwd := filepath.Join(t.TempDir(), "dir"+nasty)
	if err := os.Mkdir(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	g := newGate(t)
	defer g.open(t)
	cmd := "sleep 0 #" + nasty + "\n" + g.wait()
	r := d.run("--client-id", "ci\u009b31m", "queue", "--cwd", cwd, "-e", "V=v"+nasty, "--", cmd)
	r.want(t, 0, nil, nil)
	id := strings.TrimSpace(r.stdout)
	d.waitState(id, "running")

	for _, args := range [][]string{{"list"}, {"status"}, {"job", id}} {
		r := d.run(args...)
		r.want(t, 0, []string{`\x1b[2J`, `\u009b31m`}, nil)
		clean(t, args[0], r.stdout)
	}
	r = d.run("job", id)
	for _, want := range []string{"sleep 0 #" + escaped + "\n", "dir" + escaped + "\n", "V=v" + escaped + "\n", "client     ci\\u009b31m\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("job lacks %q: %v", want, r)
		}
	}
	// --json is the exact value.
	var j api.Job
	decode(t, d.run("--json", "job", id), &j)
	if j.Cmd != cmd || j.Cwd != cwd || j.Env["V"] != "v"+nasty || j.ClientID != "ci\u009b31m" {
		t.Errorf("job --json changed the fields: %+v", j)
	}
	var jobs []api.Job
	if err := json.Unmarshal([]byte(d.run("--json", "list").stdout), &jobs); err != nil || len(jobs) == 0 || jobs[0].Cmd != cmd {
		t.Errorf("list --json changed the command: %v %+v", err, jobs)
	}

	// A job's error names its directory: wait and result print it escaped.
	gone := filepath.Join(t.TempDir(), "gone"+nasty)
	if err := os.Mkdir(gone, 0o755); err != nil {
		t.Fatal(err)
	}
	failed := strings.TrimSpace(d.run("queue", "--cwd", gone, "--", "true").stdout)
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	g.open(t)
	r = d.run("wait", failed)
	r.want(t, 129, []string{"gone" + escaped}, nil)
	clean(t, "wait", r.stdout)
	r = d.run("result", failed)
	r.want(t, 129, nil, []string{"gone" + escaped})
	clean(t, "result's stderr", r.stderr)

	// A message that echoes what was typed.
	r = d.run("frob" + nasty)
	r.want(t, 2, nil, []string{"frob" + escaped})
	clean(t, "a usage error", r.stderr)
}

// A job's output is its owner's stream and is printed exactly, to a pipe
// or to its owner's terminal; shown on the terminal of someone else (an
// admin reading another user's output), its control characters are
// escaped, except newline, tab and carriage return.
func TestTerminal_AnotherUsersOutputIsEscapedOnATerminal(t *testing.T) {
	alice := usertest.New(t, "ttqe")
	s := startShared(t)
	output := "out " + nasty + " raw C1 \x9b31m invalid \xff\xfe tab\tcr\r\n"
	r := s.run(alice, "queue", "--", "printf '"+printfBytes(output)+"'")
	r.want(t, 0, nil, nil)
	id := strings.TrimSpace(r.stdout)
	s.run(alice, "wait", id).want(t, 0, nil, nil)

	// root, an admin, on a terminal.
	for _, args := range [][]string{{"logs", id}, {"result", id}} {
		p := openPTY(t)
		cmd := s.rootCommand(args...)
		cmd.Stdout, cmd.Stderr = p.tty, p.tty
		if err := cmd.Run(); err != nil {
			t.Fatalf("root's %s: %v; terminal %q", args[0], err, p.text())
		}
		p.waitFor(t, `out `+escaped+` raw C1 \x9b31m invalid \xff\xfe tab`+"\tcr\r")
		if strings.ContainsAny(p.text(), "\x1b\x07\x7f") || strings.Contains(p.text(), "\u009b") {
			t.Errorf("root's %s of alice's job reached the terminal raw: %q", args[0], p.text())
		}
	}
	// root, piped: exact.
	for _, args := range [][]string{{"logs", id}, {"result", id}} {
		r := runCmd(t, s.rootCommand(args...))
		if r.code != 0 || r.stdout != output {
			t.Errorf("root's %s through a pipe: %v; want the exact bytes %q", args[0], r, output)
		}
	}
	// alice on her own terminal: exact.
	p := openPTY(t)
	cmd := s.userCommand(alice, "logs", id)
	cmd.Stdout, cmd.Stderr = p.tty, p.tty
	if err := cmd.Run(); err != nil {
		t.Fatalf("alice's logs: %v; terminal %q", err, p.text())
	}
	p.waitFor(t, "out "+nasty)
}

// printfBytes is a printf format, safe inside single quotes, that prints
// s byte for byte: a request's cmd is JSON, which cannot carry bytes that
// are not UTF-8, so the job makes them.
func printfBytes(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '%' || c == '\\' || c == '\'' {
			fmt.Fprintf(&b, "\\%03o", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// rootCommand prepares the CLI as root (an admin) against the shared
// queued.
func (s *shared) rootCommand(args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	s.t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, s.cli, args...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root", "TT_DEVICE_URL=unix://" + s.sock}
	return cmd
}

// userCommand prepares the CLI as u against the shared queued.
func (s *shared) userCommand(u usertest.User, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	s.t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, s.cli, args...)
	cmd.Dir = u.Home
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + u.Home, "USER=" + u.Name, "TT_DEVICE_URL=unix://" + s.sock}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID}}
	return cmd
}
