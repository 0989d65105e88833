package store

import (
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user plus system CPU time so far; benchmarks
// report it per operation, since with fsync most of the wall time is
// waiting.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPut is one durable single-record commit, the cost on a card's
// critical path per job.
func BenchmarkPut(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	j := job(1, StateQueued)
	for b.Loop() {
		if err := s.Put(j); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPutConcurrent64 has 64 writers committing at once, as 64
// submitting clients do; the group commit folds them into few fsyncs.
func BenchmarkPutConcurrent64(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	per := b.N/64 + 1
	before := s.Stats()
	start, cpu0 := time.Now(), cpuTime(b)
	b.ResetTimer()
	for w := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				if err := s.Put(job(uint64(w*per+i+1), StateQueued)); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), cpuTime(b)-cpu0
	after := s.Stats()
	b.ReportMetric(float64(cpu.Microseconds())/float64(64*per), "cpu-us/write")
	b.ReportMetric(float64(after.Writes-before.Writes)/float64(after.Commits-before.Commits), "writes/commit")
	b.ReportMetric(float64(64*per)/elapsed.Seconds(), "writes/s")
}

// BenchmarkPutDrainShape is the commit on a busy card's critical path:
// job N's done record and job N+1's running record in one transaction,
// with 1000 jobs in the store.
func BenchmarkPutDrainShape(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	jobs := make([]Job, 1000)
	for i := range jobs {
		jobs[i] = job(uint64(i+1), StateQueued)
	}
	if err := s.Put(jobs...); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		done, next := jobs[i%999], jobs[i%999+1]
		done.State, done.FinishedAt = StateDone, time.Now()
		next.State = StateRunning
		if err := s.Put(done, next); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkPruneOwners is one retention run's per-user pass over 10,000
// finished jobs of 16 owners, each within their bound: reading every
// record's owner is the whole cost.
func BenchmarkPruneOwners(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	jobs := make([]Job, 10000)
	for i := range jobs {
		uid := uint32(1000 + i%16)
		jobs[i] = job(uint64(i+1), StateDone)
		jobs[i].OwnerUID, jobs[i].Owner = &uid, "user"
		jobs[i].FinishedAt = time.Unix(int64(2000+i), 0)
	}
	if err := s.Put(jobs...); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if gone, err := (pruner{s.db, s.gc}).owners(1000, func(uint32) bool { return false }); err != nil || len(gone) != 0 {
			b.Fatalf("%d pruned, %v", len(gone), err)
		}
	}
}

// BenchmarkMarkStart is a start made durable in the start log (one
// sector, one fdatasync), which a card's next job waits for instead of
// BenchmarkPutDrainShape's commit. Marks come 4 ms apart, as in a drain
// of short jobs: the file's mtime then moves with every write, so each
// fdatasync commits the file system's journal too (back to back, the
// mtime stays within one clock tick and the sync costs half).
func BenchmarkMarkStart(b *testing.B) {
	s, err := OpenStartLog(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	i := 0
	for b.Loop() {
		b.StopTimer()
		time.Sleep(4 * time.Millisecond)
		b.StartTimer()
		if err := s.MarkStart(0, "01JF0000000000000000000000", i); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkStartRead is what a job's start reads from the store: its
// spec alone (Spec, since issue 41), against the whole record as it was
// read before (Job: the brief record decoded again, then the spec). The
// job is a typical submission's: a short command and a shell's
// environment of 30 variables.
func BenchmarkStartRead(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	j := job(1, StateQueued)
	j.Cmd = "python3 train.py --epochs 3"
	j.Owner, j.Env = "alice", map[string]string{}
	for i := range 30 {
		j.Env[fmt.Sprintf("VAR_%d", i)] = strings.Repeat("v", 40)
	}
	j.EnvFromShell = []string{"VAR_0", "VAR_1"}
	if err := s.Put(j); err != nil {
		b.Fatal(err)
	}
	b.Run("spec", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Spec(j.ID); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("record", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Job(j.ID); err != nil {
				b.Fatal(err)
			}
		}
	})
}
