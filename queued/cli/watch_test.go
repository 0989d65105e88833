package cli_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tmuxSession is a detached tmux session of a fixed size on a private
// server, running one shell command; the test reads its screen.
type tmuxSession struct {
	t      *testing.T
	socket string
}

// startTmux runs command in a new detached w x h session whose server has
// env, or skips the test when tmux is absent outside CI (in CI, where
// .ci/run installs it, a missing tmux fails).
func startTmux(t *testing.T, env []string, w, h int, command string) *tmuxSession {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("tmux is not installed, and CI is set (.ci/run installs it): %v", err)
		}
		t.Skipf("tmux is not installed (%v); the watch view is tested in a real terminal under tmux", err)
	}
	s := &tmuxSession{t: t, socket: fmt.Sprintf("ttq-%d-%d", os.Getpid(), time.Now().UnixNano())}
	cmd := s.cmd("new-session", "-d", "-s", "w", "-x", fmt.Sprint(w), "-y", fmt.Sprint(h), command)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("starting tmux: %v\n%s", err, out)
	}
	t.Cleanup(func() { s.cmd("kill-server").Run() })
	return s
}

func (s *tmuxSession) cmd(args ...string) *exec.Cmd {
	return exec.Command("tmux", append([]string{"-L", s.socket, "-f", "/dev/null"}, args...)...)
}

// do runs a tmux command, failing the test if it fails.
func (s *tmuxSession) do(args ...string) string {
	s.t.Helper()
	out, err := s.cmd(args...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// screen is the pane's text now; with escapes, its colours and
// attributes as escape sequences too.
func (s *tmuxSession) screen(escapes bool) string {
	args := []string{"capture-pane", "-p", "-t", "w"}
	if escapes {
		args = append(args, "-e")
	}
	return s.do(args...)
}

// waitScreen polls the screen until ok says yes, failing after a minute
// with the last screen and what it waited for.
func (s *tmuxSession) waitScreen(what string, ok func(screen string) bool) string {
	s.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		sc := s.screen(false)
		if ok(sc) {
			return sc
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("no %s on the screen in a minute; it shows:\n%s", what, sc)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// contains is waitScreen's test for every piece being on the screen.
func contains(pieces ...string) func(string) bool {
	return func(sc string) bool {
		for _, p := range pieces {
			if !strings.Contains(sc, p) {
				return false
			}
		}
		return true
	}
}

// TestWatch_LiveInTmux runs the real watch in a real terminal: the view
// shows the cards, a job as it starts with its owner and last lines, the
// queue behind it, the cards idle again when the jobs end, a smaller
// terminal, no colour under NO_COLOR, and q restores the screen.
func TestWatch_LiveInTmux(t *testing.T) {
	d := startDaemon(t)
	env := append(append([]string(nil), d.env...), "TERM=xterm-256color", "NO_COLOR=1", "TT_QUEUE_CLIENT_ID=watcher")
	script := fmt.Sprintf("cd %s; echo BEFORE-WATCH; %s watch; echo \"watch exited $?\"; exec sleep 600",
		d.home, filepath.Join(bin, "tt-device-queue"))
	s := startTmux(t, env, 100, 40, script)

	s.waitScreen("both cards", contains("tt-device-queue watch", "card 0  healthy", "card 1  healthy", "queue: empty"))

	g := newGate(t)
	first := strings.TrimSpace(d.runWith([]string{"TT_QUEUE_CLIENT_ID=watcher"}, "", "queue", "--", "echo watch-line-one; echo watch-line-two; "+g.wait()).stdout)
	second := strings.TrimSpace(d.run("queue", "--", "echo second-done").stdout)
	if len(first) < 8 || len(second) < 8 {
		t.Fatalf("queue printed ids %q and %q", first, second)
	}
	running := s.waitScreen("the running job with its owner and last lines, and the queue behind it",
		contains("running "+first[:8], "watcher", "| watch-line-one", "| watch-line-two", "queue: 1", second[:8]))
	t.Logf("the screen with a job running:\n%s", running)
	if sc := s.screen(true); strings.Contains(sc, "\x1b[") {
		t.Errorf("NO_COLOR is set but the screen has escapes:\n%q", sc)
	}

	g.open(t)
	s.waitScreen("card 0 idle again", func(sc string) bool {
		return !strings.Contains(sc, first[:8]) && !strings.Contains(sc, second[:8]) &&
			strings.Count(sc, "queue: empty") == 2 && strings.Count(sc, "  idle") == 2
	})

	s.do("resize-window", "-t", "w", "-x", "50", "-y", "6")
	s.waitScreen("the view fitted to 50x6", func(sc string) bool {
		lines := strings.Split(strings.TrimRight(sc, "\n"), "\n")
		return len(lines) <= 6 && strings.HasPrefix(lines[0], "tt-device-queue watch") &&
			strings.Contains(sc, "more lines")
	})

	s.do("send-keys", "-t", "w", "q")
	s.waitScreen("the shell's screen back after q", func(sc string) bool {
		return strings.Contains(sc, "BEFORE-WATCH") && strings.Contains(sc, "watch exited 0") && !strings.Contains(sc, "tt-device-queue watch")
	})
}

// TestWatch_PlainWhenNotATerminal: with stdout a pipe, watch prints one
// snapshot in plain text (no escapes) and exits 0.
func TestWatch_PlainWhenNotATerminal(t *testing.T) {
	d := startDaemon(t)
	g := newGate(t)
	id := strings.TrimSpace(d.run("queue", "--", "echo plain-line; "+g.wait()).stdout)
	d.waitState(id, "running")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The line is printed by the job as it starts: wait for it in the log.
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(d.run("logs", id).stdout, "plain-line") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	r := runCmd(t, d.command(ctx, nil, "watch"))
	g.open(t)
	r.want(t, 0, []string{"card 0  healthy", "card 1  healthy", "running " + id[:8], "| plain-line", "queue: empty"}, nil)
	if strings.Contains(r.stdout, "\x1b") || strings.Contains(r.stdout, "q quits") {
		t.Errorf("plain output has escapes or the key hint:\n%q", r.stdout)
	}
	d.run("watch", "--lines", "21").want(t, 2, nil, []string{"--lines 21", "0 to 20"})
}
