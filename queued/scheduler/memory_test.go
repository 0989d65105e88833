package scheduler

import (
	"runtime"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/store"
)

// holdCard runs a gate job on card and returns its release.
func (b *bundle) holdCard(card int) func() {
	b.t.Helper()
	gate, release := b.gate()
	id := b.submit(card, gate).ID
	b.waitOutput(id, "started")
	return release
}

// TestQueuedJobs_MemoryDoesNotGrowWithRecordSize: a queued job keeps a
// bounded preview of its record in memory, not its command and
// environment (the store holds them): 200 queued jobs of 200 KiB each
// (40 MiB of records) grow the heap by a few MiB at most. Each still runs
// its whole command with its whole environment, and GET /job's Record is
// whole. Not parallel: it measures the process's heap.
func TestQueuedJobs_MemoryDoesNotGrowWithRecordSize(t *testing.T) {
	b := setup(t, nil)
	release := b.holdCard(0)
	defer release()
	// Each submission's own strings, as each request decodes its own.
	spec := func() (string, map[string]string) {
		return ": " + strings.Repeat("x", 100<<10) + "; echo cmd-end ${#BIG}", map[string]string{"BIG": strings.Repeat("e", 100<<10)}
	}
	cmd, env := spec()
	before := heapInUse()
	const n = 200
	var ids []string
	for range n {
		cmd, env := spec()
		info, err := b.s.Submit(JobSpec{Card: 0, Cmd: cmd, Cwd: b.work, Env: env})
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Cmd) > store.PreviewBytes {
			t.Fatalf("the submission's answer carries %d bytes of command", len(info.Cmd))
		}
		ids = append(ids, info.ID)
	}
	grown := heapInUse() - before
	t.Logf("%d queued jobs of %d KiB each: heap grew by %.1f MiB", n, (len(cmd)+store.EnvSize(env))>>10, float64(grown)/(1<<20))
	if grown > 8<<20 {
		t.Errorf("%d queued jobs of 200 KiB grew the heap by %.1f MiB; want at most 8", n, float64(grown)/(1<<20))
	}
	whole, err := b.s.Record(ids[0])
	if err != nil || whole.Cmd != cmd || whole.Env["BIG"] != env["BIG"] || whole.Position != 1 {
		t.Fatalf("Record of a queued job: %d bytes of command, %d variables, position %d, %v", len(whole.Cmd), len(whole.Env), whole.Position, err)
	}
	for _, id := range ids[1:] {
		if _, err := b.s.Kill(id); err != nil {
			t.Fatal(err)
		}
	}
	release()
	b.waitDone(ids[0])
	if out := output(t, b, ids[0]); out != "cmd-end 102400\n" {
		t.Fatalf("the job ran %q; want its whole command with its whole environment", out)
	}
}

// heapInUse is the heap's live bytes after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
