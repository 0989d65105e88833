package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/test/stress/queuedproc"
)

// recordBytes is the size of every job's record here: the most one job
// may have (api.MaxRecordBytes).
const recordBytes = api.MaxRecordBytes

// cmdBytes is the command's share of a record.
const cmdBytes = 64 << 10

// maxRecord is the i-th job of the largest record on card: a command of
// cmdBytes that does nothing, and two variables filling the rest of the
// budget. Each has strings of its own, as each client's request would.
func maxRecord(i int, cwd, card string) api.QueueRequest {
	head, tail := fmt.Sprintf(": %d ", i), "; true"
	cmd := head + strings.Repeat("c", cmdBytes-len(head)-len(tail)) + tail
	rest := recordBytes - len(cmd) - len("A=")*2 - 2 // each variable's NAME= and NUL
	return api.QueueRequest{Cmd: cmd, Cwd: cwd, DeviceID: card, Env: map[string]string{
		"A": strings.Repeat("a", rest/2), "B": strings.Repeat("b", rest-rest/2)}}
}

// memoryRound measures a user-mode queued's memory idle, with c.queued
// jobs of the largest records queued, at rest after c.finished of them
// have run, while c.listers clients list c.listLimit of them at once, and
// at rest again after a restart.
func memoryRound(c config, rep *report) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	dir := filepath.Join(c.work, "memory")
	state, work := filepath.Join(dir, "state"), filepath.Join(dir, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	start := func() (*queuedproc.Daemon, error) {
		return queuedproc.Start(queuedproc.Options{Bin: c.bin, StateDir: state, LogPath: filepath.Join(dir, "queued.log")})
	}
	d, err := start()
	if err != nil {
		return err
	}
	defer func() { d.Stop(30 * time.Second) }()
	cl := d.Client()
	defer cl.Close()
	idle, err := settle(ctx, d)
	if err != nil {
		return err
	}
	fmt.Printf("idle:                                          %s\n", usageText(idle))

	// Both cards held, c.queued jobs queued behind them.
	var gates []*queuedproc.Gate
	for _, card := range []string{"0", "1"} {
		g, err := queuedproc.NewGate(filepath.Join(work, "gate"+card))
		if err != nil {
			return err
		}
		j, err := cl.Queue(ctx, api.QueueRequest{Cmd: g.Cmd, Cwd: work, DeviceID: card, Timeout: 3600})
		if err != nil {
			return err
		}
		if _, err := queuedproc.WaitRunning(ctx, cl, j.JobID); err != nil {
			return err
		}
		gates = append(gates, g)
	}
	t0 := time.Now()
	subs, err := queuedproc.Storm(ctx, d, 16, c.queued, func(i int) api.QueueRequest { return maxRecord(i, work, fmt.Sprint(i%2)) })
	if err != nil {
		return err
	}
	took := time.Since(t0)
	queued, err := settle(ctx, d)
	if err != nil {
		return err
	}
	fmt.Printf("%5d jobs queued (%s each, submitted in %v): %s\n", c.queued, mib(recordBytes), took.Round(time.Millisecond), usageText(queued))
	rep.target(fmt.Sprintf("%d queued records of %d KiB: RSS above idle <= 64 MiB", c.queued, recordBytes>>10),
		queued.RSS-idle.RSS <= 64<<20, mib(queued.RSS-idle.RSS))

	// They run, and more, until c.finished are done.
	for _, g := range gates {
		if err := g.Open(ctx); err != nil {
			return err
		}
	}
	ids := make([]string, 0, c.finished)
	for _, s := range subs {
		ids = append(ids, s.JobID)
	}
	t0 = time.Now()
	if err := waitAll(ctx, d, ids); err != nil {
		return err
	}
	// In batches the queue can take (it holds at most 1,000).
	for n := c.queued; n < c.finished; {
		batch := min(c.finished-n, 900)
		more, err := queuedproc.Storm(ctx, d, 16, batch, func(i int) api.QueueRequest { return maxRecord(n+i, work, fmt.Sprint(i%2)) })
		if err != nil {
			return err
		}
		ids = ids[:0]
		for _, s := range more {
			ids = append(ids, s.JobID)
		}
		if err := waitAll(ctx, d, ids); err != nil {
			return err
		}
		n += batch
	}
	took = time.Since(t0)
	done, err := settle(ctx, d)
	if err != nil {
		return err
	}
	fmt.Printf("%5d jobs finished (in %v), at rest:         %s; queue.db %s on disk\n", c.finished, took.Round(time.Second), usageText(done), mib(diskUse(filepath.Join(state, "queue.db"))))
	rep.target(fmt.Sprintf("at rest after %d finished records of %d KiB: RSS <= 48 MiB", c.finished, recordBytes>>10), done.RSS <= 48<<20, mib(done.RSS))

	// c.listers clients list c.listLimit of them at once, three times.
	if err := queuedproc.ResetPeak(d.Pid); err != nil {
		return err
	}
	before, err := d.Usage()
	if err != nil {
		return err
	}
	var bytes int64
	t0 = time.Now()
	for range 3 {
		n, err := listAtOnce(ctx, d, c.listers, c.listLimit)
		if err != nil {
			return err
		}
		bytes = n
	}
	took = time.Since(t0) / 3
	after, err := d.Usage()
	if err != nil {
		return err
	}
	growth := after.PeakRSS - before.RSS
	fmt.Printf("%d clients listing %d jobs at once (%s each answer, %v a round): peak RSS %s, %s above the RSS before\n",
		c.listers, c.listLimit, mib(bytes/int64(c.listers)), took.Round(time.Millisecond), mib(after.PeakRSS), mib(growth))
	rep.target(fmt.Sprintf("%d concurrent GET /jobs?limit=%d: peak RSS growth <= 32 MiB", c.listers, c.listLimit), growth <= 32<<20, mib(growth))

	// And after a restart with no job active.
	if err := d.Stop(30 * time.Second); err != nil {
		return err
	}
	t0 = time.Now()
	if d, err = start(); err != nil {
		return err
	}
	up := time.Since(t0)
	restarted, err := settle(ctx, d)
	if err != nil {
		return err
	}
	fmt.Printf("restarted on those %d finished jobs (ready in %v), at rest: %s\n", c.finished, up.Round(time.Millisecond), usageText(restarted))
	rep.target(fmt.Sprintf("at rest after a restart on %d finished records: RSS <= 48 MiB", c.finished), restarted.RSS <= 48<<20, mib(restarted.RSS))
	return nil
}

// waitAll waits until every job of ids is done, each with exit 0.
func waitAll(ctx context.Context, d *queuedproc.Daemon, ids []string) error {
	jobs, err := queuedproc.WaitDone(ctx, d, ids, 16)
	if err != nil {
		return err
	}
	for id, j := range jobs {
		if j.ExitCode == nil || *j.ExitCode != 0 {
			return fmt.Errorf("job %s ended %v: %s", id, j.ExitCode, j.Error)
		}
	}
	return nil
}

// listAtOnce runs n GET /jobs?limit=limit at once and returns the bytes
// read in all.
func listAtOnce(ctx context.Context, d *queuedproc.Daemon, n, limit int) (int64, error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total int64
	var first error
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/jobs?limit=%d", d.URL, limit), nil)
			req.Header.Set("Authorization", "Bearer "+d.Token)
			resp, err := http.DefaultClient.Do(req)
			var got int64
			if err == nil {
				got, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("GET /jobs: %s", resp.Status)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			total += got
			if err != nil && first == nil {
				first = err
			}
		})
	}
	wg.Wait()
	return total, first
}

// restWait is how long the daemon must be left alone before its memory
// is read "at rest": longer than it waits, after its last request, before
// it gives back what its work left (queued's restAfter, 3 s).
const restWait = 5 * time.Second

// settle leaves the daemon alone for restWait, then waits until its RSS
// has stopped moving (within 256 KiB over five readings 200 ms apart, at
// most a minute) and returns its usage then: the memory it keeps at
// rest, not what a burst left for the collector.
func settle(ctx context.Context, d *queuedproc.Daemon) (queuedproc.Usage, error) {
	rested := time.Now().Add(restWait)
	deadline := rested.Add(time.Minute)
	var last []int64
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		u, err := d.Usage()
		if err != nil {
			return u, err
		}
		last = append(last, u.RSS)
		if len(last) > 5 {
			last = last[1:]
		}
		if len(last) == 5 && spread(last) <= 256<<10 && time.Now().After(rested) || time.Now().After(deadline) {
			return u, nil
		}
		select {
		case <-ctx.Done():
			return u, ctx.Err()
		case <-tick.C:
		}
	}
}

func spread(xs []int64) int64 {
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return hi - lo
}

// diskUse is what a file takes on disk (it may be sparse).
func diskUse(path string) int64 {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	return st.Blocks * 512
}
