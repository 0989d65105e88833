package cli_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/usertest"
	"github.com/ttkit/ttkit/queued/api"
)

// shared is a system-mode queued started as root, and the CLI where every
// user can run it.
type shared struct {
	t    *testing.T
	sock string
	cli  string
	// stop stops queued (SIGTERM) and waits for it to exit; the test's
	// end does it too.
	stop func()
}

// startShared starts queued in system mode on cards 0 and 1.
func startShared(t *testing.T, extra ...string) *shared {
	t.Helper()
	usertest.RequireRoot(t)
	open := usertest.OpenDir(t)
	s := &shared{t: t, sock: filepath.Join(open, "queued.sock"), cli: filepath.Join(open, "tt-device-queue")}
	b, err := os.ReadFile(filepath.Join(bin, "tt-device-queue"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.cli, b, 0o755); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	cmd := exec.Command(filepath.Join(bin, "queued"))
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=/root", "TT_DEVICE_IDS=0,1", "TT_DEVICE_KILL_GRACE=2",
		"TT_DEVICE_SOCKET=" + s.sock, "TT_DEVICE_LOG_DIR=" + t.TempDir()}, extra...)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.stop = sync.OnceFunc(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	})
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("queued's log:\n%s", log.String())
		}
	})
	c := api.NewUnixClient(s.sock)
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := c.Status(context.Background()); err == nil {
			return s
		}
		select {
		case <-exited:
			t.Fatalf("queued exited at start:\n%s", log.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("queued did not answer on %s:\n%s", s.sock, log.String())
		}
	}
}

// run runs the CLI as u, in u's home, with u's login environment and
// TT_DEVICE_URL naming the socket.
func (s *shared) run(u usertest.User, args ...string) result {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.cli, args...)
	cmd.Dir = u.Home
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + u.Home, "USER=" + u.Name, "TT_DEVICE_URL=unix://" + s.sock}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID}}
	return runCmd(s.t, cmd)
}

// The walkthrough: a second account queues onto the same card
// behind the first account's job through one system-mode queued; each job
// runs as its submitter; each sees its own output and not the other's.
func TestSystemMode_SecondAccountQueuesBehindTheFirst(t *testing.T) {
	alice, bob := usertest.New(t, "ttqa"), usertest.New(t, "ttqb")
	s := startShared(t)
	gate := filepath.Join(usertest.OpenDir(t), "go")

	r := s.run(alice, "queue", "--device", "0", "--", "echo alice-secret-output; id -un; while [ ! -e "+gate+" ]; do sleep 0.05; done")
	r.want(t, 0, nil, nil)
	aliceJob := strings.TrimSpace(r.stdout)
	r = s.run(bob, "queue", "--device", "0", "--", "echo bob-output; id -un")
	r.want(t, 0, nil, []string{"position 1"}) // next, behind the running one
	bobJob := strings.TrimSpace(r.stdout)

	s.run(bob, "status").want(t, 0, []string{"system mode", "you are " + bob.Name, alice.Name}, nil)
	// Bob's own jobs are those he submitted, whatever client id.
	r = s.run(bob, "--client-id", alice.Name, "list", "--mine")
	if r.code != 0 || !strings.Contains(r.stdout, bobJob[:8]) || strings.Contains(r.stdout, aliceJob[:8]) {
		t.Errorf("bob's list --mine: %v", r)
	}
	for _, cmd := range [][]string{{"logs", aliceJob}, {"result", aliceJob}, {"job", aliceJob}, {"kill", aliceJob}} {
		r := s.run(bob, cmd...)
		if r.code != 1 || !strings.Contains(r.stderr, "belongs to "+alice.Name) || strings.Contains(r.stdout, "alice-secret-output") {
			t.Errorf("bob's %s of alice's job: %v", cmd[0], r)
		}
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r = s.run(alice, "wait", aliceJob)
	r.want(t, 0, nil, nil)
	s.run(alice, "result", aliceJob).want(t, 0, []string{"alice-secret-output", alice.Name}, nil)
	s.run(bob, "wait", bobJob).want(t, 0, nil, nil)
	r = s.run(bob, "result", bobJob)
	r.want(t, 0, []string{"bob-output", bob.Name}, nil)
	if strings.Contains(r.stdout, "alice") {
		t.Errorf("bob's result shows alice's output: %v", r)
	}
	s.run(alice, "job", bobJob).want(t, 1, nil, []string{"belongs to " + bob.Name})
	s.run(bob, "job", bobJob).want(t, 0, []string{"owner      " + bob.Name + " (uid " + strconv.Itoa(int(bob.UID)) + ")"}, nil)
}
