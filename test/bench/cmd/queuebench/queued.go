package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/test/stress/queuedproc"
)

type drainResult struct {
	// storm is the submission of the jobs behind the gate: the storm's
	// p99 is its first wave (stormResult).
	storm    stormResult
	drain    time.Duration
	cpu      time.Duration // the server's, over the storm and the drain
	childCPU time.Duration
	peakRSS  int64
	// stealSubmit and stealDrain are the shares of the machine's CPU the
	// hypervisor gave elsewhere during the storm and the drain.
	stealSubmit, stealDrain float64
}

// startQueued runs a daemon with its own state directory under c.work.
func startQueued(c config, name string, env ...string) (*queuedproc.Daemon, string, error) {
	dir := filepath.Join(c.work, name)
	if err := os.MkdirAll(filepath.Join(dir, "work"), 0o755); err != nil {
		return nil, "", err
	}
	d, err := queuedproc.Start(queuedproc.Options{Bin: c.bin, StateDir: filepath.Join(dir, "state"),
		LogPath: filepath.Join(dir, "queued.log"), Env: env})
	return d, filepath.Join(dir, "work"), err
}

// gated is a fresh daemon whose card 0 is held by a running gate job, the
// starting point of every storm.
type gated struct {
	d    *queuedproc.Daemon
	cl   *api.Client
	work string
	gate *queuedproc.Gate
}

// startGated starts a daemon (see startQueued) and waits until the gate
// job runs on card 0. Close stops the daemon.
func startGated(ctx context.Context, c config, name string, env ...string) (*gated, error) {
	d, work, err := startQueued(c, name, env...)
	if err != nil {
		return nil, err
	}
	g := &gated{d: d, cl: d.Client(), work: work}
	if err := g.holdCard(ctx); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

func (g *gated) holdCard(ctx context.Context) error {
	gate, err := queuedproc.NewGate(filepath.Join(g.work, "gate"))
	if err != nil {
		return err
	}
	g.gate = gate
	j, err := g.cl.Queue(ctx, api.QueueRequest{Cmd: gate.Cmd, Cwd: g.work, Timeout: 600})
	if err != nil {
		return err
	}
	_, err = queuedproc.WaitRunning(ctx, g.cl, j.JobID)
	return err
}

// Close releases the client and stops the daemon.
func (g *gated) Close() {
	g.cl.Close()
	g.d.Stop(30 * time.Second)
}

// ourDrain runs the shape once on a fresh daemon.
func ourDrain(c config, run int) (drainResult, error) {
	var r drainResult
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	g, err := startGated(ctx, c, "queued-drain-"+strconv.Itoa(run))
	if err != nil {
		return r, err
	}
	defer g.Close()
	d, cl, work := g.d, g.cl, g.work
	u0, err := d.Usage()
	if err != nil {
		return r, err
	}
	steal := queuedproc.StartSteal()
	var subs []queuedproc.Submission
	r.storm, subs, err = measureStorm(ctx, d, c.clients, c.jobs, work)
	r.stealSubmit = steal.Stop()
	if err != nil {
		return r, err
	}
	st, err := cl.Status(ctx)
	if err != nil {
		return r, err
	}
	if st.Queued != c.jobs || len(st.Cards) == 0 || len(st.Cards[0].Pending) != c.jobs {
		return r, fmt.Errorf("%d jobs queued after the storm, want %d", st.Queued, c.jobs)
	}
	last := st.Cards[0].Pending[c.jobs-1].ID
	t1 := time.Now()
	steal = queuedproc.StartSteal()
	if err := g.gate.Open(ctx); err != nil {
		return r, err
	}
	if _, err := cl.WaitResult(ctx, last); err != nil {
		return r, err
	}
	r.drain, r.stealDrain = time.Since(t1), steal.Stop()
	u2, err := d.Usage()
	if err != nil {
		return r, err
	}
	ids := make([]string, len(subs))
	for i, s := range subs {
		ids[i] = s.JobID
	}
	jobs, err := queuedproc.WaitDone(ctx, d, ids, 16)
	if err != nil {
		return r, err
	}
	for id, j := range jobs {
		if j.ExitCode == nil || *j.ExitCode != 0 {
			return r, fmt.Errorf("job %s ended %v: %s", id, j.ExitCode, j.Error)
		}
	}
	r.cpu, r.childCPU, r.peakRSS = u2.CPU-u0.CPU, u2.ChildCPU-u0.ChildCPU, u2.PeakRSS
	return r, nil
}

type dispatchResult struct {
	median, p90, floor, recorded time.Duration
	steal                        float64
}

// dispatchProbe is the job the dispatch figure times: its first command
// writes the wall clock as bash sees it once the process has started
// ($EPOCHREALTIME, microseconds, no second process), so the figure is
// submission to process start plus bash's own start-up, nothing the job
// does later.
func dispatchProbe(out string) string { return "echo $EPOCHREALTIME > " + out }

// ourDispatch submits jobs one at a time to an idle card; each writes the
// wall clock at its first command. The floor is the same program
// spawned from Go.
func ourDispatch(c config, name string) (dispatchResult, error) {
	var r dispatchResult
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, work, err := startQueued(c, name)
	if err != nil {
		return r, err
	}
	defer d.Stop(30 * time.Second)
	cl := d.Client()
	defer cl.Close()
	var lat, floor, recorded []time.Duration
	steal := queuedproc.StartSteal()
	for i := range c.dispatchSamples + 1 {
		out := filepath.Join(work, "t"+strconv.Itoa(i))
		t0 := time.Now()
		resp, err := cl.Queue(ctx, api.QueueRequest{Cmd: dispatchProbe(out), Cwd: work, DeviceID: "1"})
		if err != nil {
			return r, err
		}
		j, err := cl.WaitResult(ctx, resp.JobID)
		if err != nil {
			return r, err
		}
		started, err := readClock(out)
		if err != nil {
			return r, err
		}
		if i == 0 {
			continue // the first pays for warming caches
		}
		lat = append(lat, started.Sub(t0))
		if j.StartedAt != nil {
			recorded = append(recorded, j.StartedAt.Sub(j.SubmittedAt))
		}

		t0 = time.Now()
		if err := exec.Command("bash", "-c", dispatchProbe(out)).Run(); err != nil {
			return r, err
		}
		started, err = readClock(out)
		if err != nil {
			return r, err
		}
		floor = append(floor, started.Sub(t0))
	}
	r.median, r.p90 = queuedproc.Percentile(lat, 50), queuedproc.Percentile(lat, 90)
	r.floor, r.recorded = queuedproc.Percentile(floor, 50), queuedproc.Percentile(recorded, 50)
	r.steal = steal.Stop()
	return r, nil
}

// readClock reads the "seconds.microseconds" a dispatch probe wrote.
func readClock(path string) (time.Time, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, err
	}
	text := strings.TrimSpace(string(b))
	// bash writes the locale's decimal point.
	sec, frac, ok := strings.Cut(strings.Replace(text, ",", ".", 1), ".")
	s, err1 := strconv.ParseInt(sec, 10, 64)
	us, err2 := strconv.ParseInt(frac, 10, 64)
	if !ok || len(frac) != 6 || err1 != nil || err2 != nil {
		return time.Time{}, fmt.Errorf("reading %s: %q is not bash's $EPOCHREALTIME (is the job shell bash 5?)", path, text)
	}
	return time.Unix(s, us*1000), nil
}

type memResult struct {
	idle, loaded, peak int64
}

// ourMemory reads the daemon's RSS once it has answered a first request,
// and again with c.memJobs jobs queued behind a gate.
func ourMemory(c config) (memResult, error) {
	var r memResult
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, work, err := startQueued(c, "queued-memory", "TT_DEVICE_MAX_QUEUED_JOBS="+strconv.Itoa(c.memJobs))
	if err != nil {
		return r, err
	}
	g := &gated{d: d, cl: d.Client(), work: work}
	defer g.Close()
	cl := g.cl
	if _, err := cl.Status(ctx); err != nil {
		return r, err
	}
	u, err := d.Usage()
	if err != nil {
		return r, err
	}
	r.idle = u.RSS
	if err := g.holdCard(ctx); err != nil {
		return r, err
	}
	if _, err := queuedproc.Storm(ctx, d, c.clients, c.memJobs, func(i int) api.QueueRequest {
		return api.QueueRequest{Cmd: "/bin/true", Cwd: work, ClientID: "memory-" + strconv.Itoa(i)}
	}); err != nil {
		return r, err
	}
	if _, err := cl.Status(ctx); err != nil {
		return r, err
	}
	u, err = d.Usage()
	if err != nil {
		return r, err
	}
	r.loaded, r.peak = u.RSS, u.PeakRSS
	return r, nil
}

// curvePoint is one storm of the submission curve.
type curvePoint struct {
	stormResult
	clients int
	steal   float64
}

// ourSubmitCurve submits c.jobs jobs behind a gate at several client
// counts, each on a fresh daemon, to show where the 64-client latency
// comes from: with N clients always waiting, latency is N / throughput.
func ourSubmitCurve(c config) ([]curvePoint, error) {
	var out []curvePoint
	for _, clients := range []int{1, 16, c.clients} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		p, err := func() (curvePoint, error) {
			p := curvePoint{clients: clients}
			g, err := startGated(ctx, c, "queued-curve-"+strconv.Itoa(clients))
			if err != nil {
				return p, err
			}
			defer g.Close()
			steal := queuedproc.StartSteal()
			p.stormResult, _, err = measureStorm(ctx, g.d, clients, c.jobs, g.work)
			p.steal = steal.Stop()
			return p, err
		}()
		cancel()
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}
