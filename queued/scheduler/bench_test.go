package scheduler

import (
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
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
		s, err := New(Options{Store: st, Devices: []int{0}, OutputDir: filepath.Join(dir, "output"),
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
		s.Stop()
		st.Close()
		b.ReportMetric(drain.Seconds(), "drain-s")
		b.ReportMetric(floor.Seconds(), "floor-s")
		b.ReportMetric(drain.Seconds()/floor.Seconds(), "x-floor")
		b.ReportMetric(float64(after.Commits-before.Commits)/n, "commits/job")
		b.ReportMetric(cpu.Seconds(), "cpu-s")
	}
}

// cpuTime is this process's user+system CPU time (children excluded).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
