package scheduler

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	rtmetrics "runtime/metrics"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
)

// BenchmarkDrain900 is issue 8's drain shape: a gate job holds card 0
// while 900 `/bin/true` jobs are submitted by 64 concurrent clients; then
// the gate opens and the benchmark measures the time from the gate's end
// to the last job's end, next to the floor of spawning the same 900
// `bash -c /bin/true` one after another from Go in the same run. Every
// transition is durable (a real bbolt file on disk). Run it with
// -benchtime=1x.
func BenchmarkDrain900(b *testing.B) {
	const n = 900
	sh := runner.Shell()
	for b.Loop() {
		floorStart := time.Now()
		for range n {
			if err := exec.Command(sh[0], sh[1], "/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
		floor := time.Since(floorStart)

		dir := b.TempDir()
		st, err := store.Open(dir, store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		starts, err := store.OpenStartLog(dir)
		if err != nil {
			b.Fatal(err)
		}
		s, err := New(Options{Store: st, Starts: starts, Devices: []int{0}, OutputDir: filepath.Join(dir, "output"),
			MaxQueued: n + 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			b.Fatal(err)
		}
		gate, err := s.Submit(JobSpec{Card: 0, Cmd: "exec sleep 1000", Cwd: dir})
		if err != nil {
			b.Fatal(err)
		}
		ids := make([]string, n)
		var wg sync.WaitGroup
		for c := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := c; i < n; i += 64 {
					info, err := s.Submit(JobSpec{Card: 0, Cmd: "/bin/true", Cwd: dir})
					if err != nil {
						b.Error(err)
						return
					}
					ids[i] = info.ID
				}
			}()
		}
		wg.Wait()
		if st := s.Status(); st.Queued != n {
			b.Fatalf("queued %d", st.Queued)
		}
		before := st.Stats()
		cpuBefore := cpuTime()
		switches0, goroutines0 := wakes()
		if _, err := s.Kill(gate.ID); err != nil {
			b.Fatal(err)
		}
		var last, gateEnd time.Time
		for _, id := range append([]string{gate.ID}, ids...) {
			for {
				w, err := s.Watch(id)
				if err != nil {
					b.Fatal(err)
				}
				if w.Done {
					if id == gate.ID {
						gateEnd = w.Info.FinishedAt
					} else if *w.Info.ExitCode != 0 {
						b.Fatalf("job failed: %+v", w.Info.Job)
					}
					last = w.Info.FinishedAt
					break
				}
				<-w.JobChanged
			}
		}
		drain := last.Sub(gateEnd)
		after := st.Stats()
		cpu := cpuTime() - cpuBefore
		switches, goroutines := wakes()
		s.Stop()
		st.Close()
		starts.Close()
		b.ReportMetric(drain.Seconds(), "drain-s")
		b.ReportMetric(floor.Seconds(), "floor-s")
		b.ReportMetric(drain.Seconds()/floor.Seconds(), "x-floor")
		b.ReportMetric(float64(after.Commits-before.Commits)/n, "commits/job")
		b.ReportMetric(cpu.Seconds(), "cpu-s")
		b.ReportMetric((switches-switches0)/n, "vcsw/job")
		b.ReportMetric((goroutines-goroutines0)/n, "goroutines/job")
	}
}

// wakes is how often this process's threads have gone to sleep
// (getrusage's voluntary context switches, every thread's) and how many
// goroutines it has started: figures that, unlike its CPU, do not move
// with a shared host's load (docs/queue-wakeups.md).
func wakes() (switches, goroutines float64) {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	created := []rtmetrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	rtmetrics.Read(created)
	return float64(ru.Nvcsw), float64(created[0].Value.Uint64())
}

// cpuTime is this process's user+system CPU time (children excluded).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heldCard starts a scheduler with card 0 held by a long job, on a real
// bbolt store on tmpfs where there is one, so the fsync does not drown
// what the submission benchmarks measure. It returns the scheduler and
// the directory jobs run in; both are cleaned up with b.
func heldCard(b *testing.B, maxQueued int) (*Scheduler, string) {
	b.Helper()
	dir := b.TempDir()
	if d, err := os.MkdirTemp("/dev/shm", "queued-bench-"); err == nil {
		dir = d
		b.Cleanup(func() { os.RemoveAll(d) })
	}
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	s, err := New(Options{Store: st, Devices: []int{0}, OutputDir: filepath.Join(dir, "output"),
		MaxQueued: maxQueued, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Stop)
	held, err := s.Submit(JobSpec{Card: 0, Cmd: "exec sleep 1000", Cwd: dir})
	if err != nil {
		b.Fatal(err)
	}
	// The job must be running, not still queued, before anything is
	// submitted behind it: a queued holder would count in every position.
	deadline := time.After(30 * time.Second)
	for {
		w, err := s.Watch(held.ID)
		if err != nil {
			b.Fatal(err)
		}
		if w.Info.State == store.StateRunning {
			break
		}
		if w.Done {
			b.Fatalf("the job holding the card ended: %s %s", w.Info.Outcome, w.Info.Error)
		}
		select {
		case <-w.JobChanged:
		case <-deadline:
			b.Fatalf("the job holding the card never started; last state %s", w.Info.State)
		}
	}
	return s, dir
}

// BenchmarkSubmitDeepQueue measures one Submit behind queues of different
// depths on a held card, so its cost can be compared across depths: the
// answer's position and wait come from running sums, not a walk of the
// queue. The store is a real bbolt file on tmpfs where there is one, so
// the fsync does not drown what is measured. Each submitted job is killed
// again (untimed) to keep the depth constant.
func BenchmarkSubmitDeepQueue(b *testing.B) {
	for _, depth := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			s, dir := heldCard(b, depth+2)
			cmds := []string{"python3 a.py", "python3 b.py", "make test"}
			for i := range depth {
				if _, err := s.Submit(JobSpec{Card: 0, Cmd: cmds[i%3], Cwd: dir, Repeat: 1 + i%2}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				info, err := s.Submit(JobSpec{Card: 0, Cmd: "python3 a.py", Cwd: dir})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if info.Position != depth+1 {
					b.Fatalf("position %d", info.Position)
				}
				if _, err := s.Kill(info.ID); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkSubmit64DeepQueue is issue 8's submission shape without HTTP:
// 64 concurrent clients submit behind 900 queued jobs on a held card and
// the benchmark reports the p50 and p99 latency of one Submit. Concurrent
// submitters share store commits, so most answers find their job no
// longer at the tail; the answer walks back only over the jobs submitted
// meanwhile. The store is a real bbolt file, on tmpfs where there is one.
func BenchmarkSubmit64DeepQueue(b *testing.B) {
	s, dir := heldCard(b, 1<<30)
	for i := range 900 {
		if _, err := s.Submit(JobSpec{Card: 0, Cmd: fmt.Sprint("job ", i%7), Cwd: dir}); err != nil {
			b.Fatal(err)
		}
	}
	const clients = 64
	lat := make([][]time.Duration, clients)
	per := b.N/clients + 1
	b.ResetTimer()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				t0 := time.Now()
				if _, err := s.Submit(JobSpec{Card: 0, Cmd: fmt.Sprint("job ", (c+i)%7), Cwd: dir}); err != nil {
					b.Error(err)
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	q := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))]) / float64(time.Microsecond) }
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}
