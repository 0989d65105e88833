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

// sink keeps the test's allocations from being optimized away.
var sink []byte

// TestAtRest_GivesBackOnlyAtRestAfterWork: the store's pages are dropped
// (and the heap's free memory returned) once no request has been worked
// on for restAfter and the heap has allocated since the last time; not
// while requests are worked on, and not again without new work.
func TestAtRest_GivesBackOnlyAtRestAfterWork(t *testing.T) {
	t.Parallel()
	q, st := &fakeQuiet{}, &countingReleaser{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { atRest(q, st, stop, t.Logf); close(done) }()
	defer func() { close(stop); <-done }()
	for range 8 {
		sink = make([]byte, 1<<20) // work: 8 MiB allocated
	}
	deadline := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if st.n.Load() != 0 {
			t.Fatal("gave back while requests were worked on")
		}
		time.Sleep(100 * time.Millisecond) // atRest looks once a second; nothing to wait on
	}
	q.resting.Store(int64(time.Hour))
	waitUntil(t, "the pages given back at rest", func() bool { return st.n.Load() == 1 })
	deadline = time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if n := st.n.Load(); n != 1 {
			t.Fatalf("gave back %d times without new work", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

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
