package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

// TestUsage_OneLineAndTheSameFlags: a usage error is one line and where
// the usage is, never the whole help; --timeout takes a duration like
// --wait-timeout.
func TestUsage_OneLineAndTheSameFlags(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, args := range [][]string{{"run", "--bogus", "--", "true"}, {"list", "--state", "finished"}, {"wait"}} {
		r := d.run(args...)
		if r.code != 2 || strings.Contains(r.stderr, "Flags:") || strings.Contains(r.stderr, "Usage:") {
			t.Fatalf("%v printed the whole help or the wrong status: %v", args, r)
		}
	}
	d.run("run", "--bogus", "--", "true").want(t, 2, nil, []string{"unknown flag --bogus", "`tt-device-queue run --help` shows the usage"})

	id := strings.TrimSpace(d.run("queue", "--timeout", "10m", "--", "true").stdout)
	var j api.Job
	decode(t, d.run("--json", "job", id), &j)
	if j.Timeout != 600 {
		t.Fatalf("--timeout 10m stored %d s", j.Timeout)
	}
	d.run("queue", "--timeout", "soon", "--", "true").want(t, 2, nil, []string{`"soon"`})
}

// TestMessages_AnotherUsersQueue: a socket the caller may not reach is
// "someone else's queue", not "queued is not running".
func TestMessages_AnotherUsersQueue(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the CLI as another user")
	}
	d := startDaemon(t)
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := d.command(ctx, nil, "status")
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 || !strings.Contains(stderr.String(), "belongs to someone else") ||
		strings.Contains(stderr.String(), "not running") {
		t.Fatalf("status as another user: %v\n%s", err, stderr.String())
	}
}

// TestMessages_RunCutShortByAStop: run (and logs -f) of a job that a
// service stop interrupts says so and exits 129.
func TestMessages_RunCutShortByAStop(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := d.command(ctx, nil, "run", "--", "echo started; sleep 1000")
	var stdout, stderr strings.Builder
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	var id string
	for id == "" {
		if out := d.run("--json", "list", "--state", "running").stdout; strings.Contains(out, `"id":"`) {
			id = strings.SplitN(strings.SplitN(out, `"id":"`, 2)[1], `"`, 2)[0]
		}
		if time.Now().After(deadline) {
			t.Fatal("the job never ran")
		}
	}
	follow := d.command(ctx, nil, "logs", "-f", id)
	var fstderr strings.Builder
	follow.Stderr = &fstderr
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	// Stop only once the follower waits on the daemon beside run (two
	// long-polls): a stop before it connects leaves it nothing to reach.
	for {
		var st api.Status
		if r := d.run("--json", "status"); r.code == 0 && json.Unmarshal([]byte(r.stdout), &st) == nil && st.HTTP.LongPolls >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("logs -f never waited on the daemon")
		}
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	run.Wait()
	follow.Wait()
	if run.ProcessState.ExitCode() != 129 || !strings.Contains(stderr.String(), "was interrupted: exit code -1 (status 129): interrupted by service stop") {
		t.Fatalf("run cut short by a stop: exit %d\n%s", run.ProcessState.ExitCode(), stderr.String())
	}
	if follow.ProcessState.ExitCode() != 129 || !strings.Contains(fstderr.String(), "interrupted by service stop") {
		t.Fatalf("logs -f cut short by a stop: exit %d\n%s", follow.ProcessState.ExitCode(), fstderr.String())
	}
}
