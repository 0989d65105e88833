package main

import (
	"context"
	"os"
	"syscall"
	"testing"
)

// TestMain lets the test binary be the no-op server too, as queuebench's
// own binary is (startNoopServer runs os.Executable).
func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == noopServerFlag {
		if err := serveNoop(); err != nil {
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The floor's storm goes through the same client and storm as queued's:
// every submission is answered and parsed, the first of each client is
// marked, the server's CPU is read from its process, and the server, a
// process of its own, ends when queuebench lets go of it.
func TestFloorStorm_AnswersEverySubmissionAndEnds(t *testing.T) {
	c := config{jobs: 40, clients: 4, work: t.TempDir()}
	d, stop, err := startNoopServer()
	if err != nil {
		t.Fatal(err)
	}
	pid := d.Pid
	r, subs, err := measureStorm(context.Background(), d, c.clients, c.jobs, c.work)
	if serr := stop(); serr != nil {
		t.Errorf("stopping the no-op server: %v", serr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if r.p50 <= 0 || r.p99 <= 0 || r.firstP50 <= 0 || r.laterP99 <= 0 || r.rate() <= 0 || r.n != c.jobs || len(subs) != c.jobs {
		t.Errorf("storm figures %+v: every latency should be measured", r)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("the no-op server (pid %d) still runs after stop", pid)
	}
}
