package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/test/stress/queuedproc"
)

// The storm's p99 (the submit target of issue 41) is measured on a fresh
// daemon with fresh clients. Two more storms of the same shape say what it
// is made of: the same clients against an HTTP server that answers at
// once (what Go's HTTP costs on this machine with nothing behind it, the
// storm's floor), and against a daemon that has taken one storm already
// (its heap grown, its code paged in), with new clients.

// stormResult is one storm: its size and length, its latencies and the
// server's CPU over it.
type stormResult struct {
	n                  int
	elapsed            time.Duration
	p50, p99           time.Duration
	firstP50, laterP99 time.Duration // each client's first submission, and the rest
	cpu                time.Duration
}

// rate is the storm's submissions a second.
func (r stormResult) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

// cpuEach is the server's CPU a submission.
func (r stormResult) cpuEach() time.Duration { return r.cpu / time.Duration(r.n) }

// measureStorm runs one storm of n submissions from clients fresh
// clients against d, reads d's CPU around it, and returns the figures
// and the acknowledged submissions.
func measureStorm(ctx context.Context, d *queuedproc.Daemon, clients, n int, cwd string) (stormResult, []queuedproc.Submission, error) {
	var r stormResult
	u0, err := d.Usage()
	if err != nil {
		return r, nil, err
	}
	t0 := time.Now()
	subs, err := queuedproc.Storm(ctx, d, clients, n, func(int) api.QueueRequest {
		return api.QueueRequest{Cmd: "/bin/true", Cwd: cwd}
	})
	r.elapsed = time.Since(t0)
	if err != nil {
		return r, nil, err
	}
	u1, err := d.Usage()
	if err != nil {
		return r, nil, err
	}
	lat := make([]time.Duration, len(subs))
	for i, s := range subs {
		lat[i] = s.Latency
	}
	first, later := queuedproc.FirstAndLater(subs)
	r.n, r.cpu = len(subs), u1.CPU-u0.CPU
	r.p50, r.p99 = queuedproc.Percentile(lat, 50), queuedproc.Percentile(lat, 99)
	r.firstP50, r.laterP99 = queuedproc.Percentile(first, 50), queuedproc.Percentile(later, 99)
	return r, subs, nil
}

// medianStorm is the median of each figure over rs, so that one storm
// that met a stall on a shared machine does not decide a figure alone.
func medianStorm(rs []stormResult) stormResult {
	pick := func(f func(stormResult) time.Duration) time.Duration {
		ds := make([]time.Duration, len(rs))
		for i, r := range rs {
			ds[i] = f(r)
		}
		return median(ds)
	}
	return stormResult{
		n:        rs[0].n,
		elapsed:  pick(func(r stormResult) time.Duration { return r.elapsed }),
		p50:      pick(func(r stormResult) time.Duration { return r.p50 }),
		p99:      pick(func(r stormResult) time.Duration { return r.p99 }),
		firstP50: pick(func(r stormResult) time.Duration { return r.firstP50 }),
		laterP99: pick(func(r stormResult) time.Duration { return r.laterP99 }),
		cpu:      pick(func(r stormResult) time.Duration { return r.cpu }),
	}
}

// eachRun measures one storm c.runs times, each within its own two
// minutes.
func eachRun(c config, one func(ctx context.Context, run int) (stormResult, error)) ([]stormResult, error) {
	out := make([]stormResult, c.runs)
	for i := range c.runs {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		r, err := one(ctx, i)
		cancel()
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// warmStorms: a fresh daemon takes one storm, then the measured one
// from new clients.
func warmStorms(c config) ([]stormResult, error) {
	return eachRun(c, func(ctx context.Context, run int) (stormResult, error) {
		g, err := startGated(ctx, c, "queued-warm-"+strconv.Itoa(run),
			"TT_DEVICE_MAX_QUEUED_JOBS="+strconv.Itoa(2*c.jobs+1))
		if err != nil {
			return stormResult{}, err
		}
		defer g.Close()
		if _, _, err := measureStorm(ctx, g.d, c.clients, c.jobs, g.work); err != nil {
			return stormResult{}, fmt.Errorf("warm storms, the first: %w", err)
		}
		r, _, err := measureStorm(ctx, g.d, c.clients, c.jobs, g.work)
		return r, err
	})
}

// floorStorms: each storm against a fresh no-op server.
func floorStorms(c config) ([]stormResult, error) {
	return eachRun(c, func(ctx context.Context, _ int) (stormResult, error) {
		d, stop, err := startNoopServer()
		if err != nil {
			return stormResult{}, err
		}
		r, _, err := measureStorm(ctx, d, c.clients, c.jobs, c.work)
		if serr := stop(); err == nil {
			err = serr
		}
		if err != nil {
			return r, fmt.Errorf("the no-op server's storm: %w", err)
		}
		return r, nil
	})
}

// noopServerFlag runs queuebench as the no-op server (startNoopServer).
const noopServerFlag = "-noop-server"

// startNoopServer runs this program again as a no-op server, a process
// of its own as queued is, and returns it as a Daemon for queuedproc's
// storms; stop ends it, and says so if the server did not end by itself
// once its input closed.
func startNoopServer() (*queuedproc.Daemon, func() error, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, self, noopServerFlag)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, nil, err
	}
	cmd.Stderr = os.Stderr
	// Stopping closes its input, at whose end it exits; one that does not
	// is killed after WaitDelay.
	cmd.Cancel, cmd.WaitDelay = stdin.Close, 5*time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, nil, fmt.Errorf("starting %s %s: %w", self, noopServerFlag, err)
	}
	stop := func() error {
		cancel()
		if err := cmd.Wait(); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("the no-op server did not end when its input closed: %w", err)
		}
		return nil
	}
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("reading the no-op server's address: %w", err)
	}
	return &queuedproc.Daemon{Pid: cmd.Process.Pid, URL: "http://" + strings.TrimSpace(addr), Token: "none"}, stop, nil
}

// noopAnswer is what the no-op server answers every request with: a
// POST /queue answer of the size queued sends.
var noopAnswer = func() []byte {
	b, err := json.Marshal(api.QueueResponse{JobID: "0123456789abcdef", DeviceID: "0", State: "queued", Position: 1,
		OutputFile: "/var/lib/queued/logs/0123456789abcdef.log", Repeat: 1, Timeout: 3600, Mode: "run"})
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}()

// noopHandler reads the request's body and answers 201 with noopAnswer,
// taking no other step.
func noopHandler(w http.ResponseWriter, r *http.Request) {
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	w.Write(noopAnswer)
}

// serveNoop is the no-op server's process: it listens on a free loopback
// port, writes the address on stdout and serves until its stdin ends.
func serveNoop() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() {
		io.Copy(io.Discard, os.Stdin)
		ln.Close()
	}()
	fmt.Println(ln.Addr().String())
	if err := http.Serve(ln, http.HandlerFunc(noopHandler)); !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// stormRange names the runs behind a p99: one run, or the median's range.
func stormRange(rs []stormResult) string {
	if len(rs) == 1 {
		return "one run"
	}
	lo, hi := rs[0].p99, rs[0].p99
	for _, r := range rs {
		lo, hi = min(lo, r.p99), max(hi, r.p99)
	}
	return fmt.Sprintf("median of %d runs, %v to %v", len(rs), ms(lo), ms(hi))
}
