package cli_test

import (
	"context"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

var jobIDRe = regexp.MustCompile(`\b[0-9a-f]{32}\b`)

func TestRun(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)

	t.Run("exit status and output of a failing job", func(t *testing.T) {
		r := d.run("run", "--", "echo out; echo err >&2; exit 3")
		r.want(t, 3, nil, []string{"queued on card 0 at position", "failed: exit code 3"})
		if r.stdout != "out\nerr\n" {
			t.Fatalf("stdout = %q, want the job's output alone", r.stdout)
		}
	})
	t.Run("a signal is 128+N", func(t *testing.T) {
		r := d.run("run", "--device", "1", "--", "kill -TERM $$")
		r.want(t, 128+15, nil, []string{"exit code -15 (status 143)"})
	})
	t.Run("timeout kills the job: 128+9", func(t *testing.T) {
		r := d.run("run", "--timeout", "1", "--", "echo started; sleep 30")
		r.want(t, 128+9, []string{"started"}, []string{"timed out after 1s"})
	})
	t.Run("repeat and env", func(t *testing.T) {
		r := d.run("run", "--device", "1", "--repeat", "3", "-e", "A=x", "--env", "B=y z", "--", `echo "$A-$B"`)
		r.want(t, 0, nil, nil)
		if r.stdout != "\n[tt-device-queue] Repeat 1/3\nx-y z\n\n[tt-device-queue] Repeat 2/3\nx-y z\n\n[tt-device-queue] Repeat 3/3\nx-y z\n" {
			t.Fatalf("stdout = %q", r.stdout)
		}
	})
	t.Run("cwd", func(t *testing.T) {
		dir := t.TempDir()
		d.run("run", "--cwd", dir, "--", "pwd").want(t, 0, []string{dir}, nil)
	})
}

// TestRun_StreamsOutput checks that output arrives while the job runs, and
// that the position is shown while it waits behind another job.
func TestRun_StreamsOutputWhileRunning(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	first, second := newGate(t), newGate(t)
	blocker := d.run("queue", "--", first.wait())
	blocker.want(t, 0, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := d.command(ctx, nil, "run", "--", "echo one; "+second.wait()+"; echo two")
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out, errs := readLines(stdout), readLines(stderr)
	errs.waitFor(t, "at position 1")
	first.open(t)
	errs.waitFor(t, "started on card 0")
	out.waitFor(t, "one")
	if strings.Contains(out.text(), "two") {
		t.Fatalf("saw the end of the output before the job could write it:\n%s", out.text())
	}
	second.open(t)
	out.waitFor(t, "two")
	<-out.done
	<-errs.done
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, errs.text())
	}
}

func TestRun_WaitTimeoutAndInterruptLeaveTheJobRunning(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	g := newGate(t)
	defer g.open(t)

	r := d.run("run", "--wait-timeout", "0.3", "--", g.wait())
	r.want(t, 124, nil, []string{"stopped waiting after 300ms", "was not stopped", "is still running on card 0", "tt-device-queue kill "})
	id := jobIDRe.FindString(r.stderr)
	if j := d.job(id); j.State != "running" {
		t.Fatalf("after the wait timeout the job is %s, want running", j.State)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := d.command(ctx, nil, "run", "--device", "1", "--", g.wait())
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	errs := readLines(stderr)
	errs.waitFor(t, "started on card 1")
	cmd.Process.Signal(syscall.SIGINT)
	<-errs.done
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("after SIGINT: %v, want exit 130\nstderr:\n%s", err, errs.text())
	}
	errs.waitFor(t, "interrupted; job")
	errs.waitFor(t, "was not stopped and is still running on card 1")
	id1 := jobIDRe.FindString(errs.text())
	if j := d.job(id1); j.State != "running" {
		t.Fatalf("after SIGINT the job is %s, want running", j.State)
	}
	g.open(t)
	d.run("result", id).want(t, 0, nil, nil)
	d.run("result", id1).want(t, 0, nil, nil)
}
