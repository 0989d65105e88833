package main

import (
	"sync/atomic"
	"testing"
	"time"
)

type fakeQuiet struct{ resting atomic.Int64 }

func (f *fakeQuiet) RestingFor() time.Duration { return time.Duration(f.resting.Load()) }

type countingReleaser struct{ n atomic.Int64 }

func (c *countingReleaser) Release() error { c.n.Add(1); return nil }

// TestAtRest_GivesBackOnlyAtRestAfterWork: the store's pages are dropped
// (and the heap's free memory returned) once no request has been worked
// on for restAfter and the heap has allocated since the last time; not
// while requests are worked on, and not again without new work. The
// allocation count is the test's own: the process's counts every test
// running beside this one, which gave back again "without new work".
func TestAtRest_GivesBackOnlyAtRestAfterWork(t *testing.T) {
	t.Parallel()
	q, st := &fakeQuiet{}, &countingReleaser{}
	var allocated atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { atRest(q, st, allocated.Load, stop, t.Logf); close(done) }()
	defer func() { close(stop); <-done }()
	allocated.Add(restWork) // work
	never := func(want int64, why string) {
		t.Helper()
		deadline := time.Now().Add(2500 * time.Millisecond)
		for time.Now().Before(deadline) {
			if n := st.n.Load(); n != want {
				t.Fatalf("gave back %d times %s", n, why)
			}
			time.Sleep(100 * time.Millisecond) // atRest looks once a second; nothing to wait on
		}
	}
	never(0, "while requests were worked on")
	q.resting.Store(int64(time.Hour))
	waitUntil(t, "the pages given back at rest", func() bool { return st.n.Load() == 1 })
	never(1, "without new work")
	allocated.Add(restWork - 1)
	never(1, "after less than restWork of new work")
	allocated.Add(1)
	waitUntil(t, "the pages given back after new work", func() bool { return st.n.Load() == 2 })
}

// heapAllocated counts what the heap allocates.
func TestHeapAllocated_Grows(t *testing.T) {
	before := heapAllocated()
	for range 8 {
		sink = make([]byte, 1<<20)
	}
	if got := heapAllocated() - before; got < 8<<20 {
		t.Errorf("heap allocated %d bytes for 8 MiB", got)
	}
}

// sink keeps the test's allocations from being optimized away.
var sink []byte

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
