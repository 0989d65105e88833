package main

import (
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// memoryLimit is the soft limit on the Go runtime's memory (GOMEMLIMIT,
// which overrides it). queued's live heap is a few MiB (a thousand queued
// jobs are a few more: their records are brief), but with gcPercent the
// runtime lets garbage grow to three times the live heap before it
// collects, so eight clients listing a thousand jobs at once grew the
// resident memory by 34 MiB of mostly garbage. Below the limit nothing
// changes; near it the runtime collects sooner and returns memory to the
// kernel sooner. It is soft: work that truly needs more (64 clients
// sending 1 MiB bodies at once) gets it, at the cost of more frequent
// collections while it lasts.
const memoryLimit = 40 << 20

// restAfter is how long queued must have answered no request before it
// counts as at rest and gives back the memory its last burst of work left
// behind.
const restAfter = 3 * time.Second

// restWork is how much the heap must have allocated since the last time
// it gave memory back for doing so again to be worth a collection.
const restWork = 4 << 20

// quiet is what atRest needs of the HTTP server: how long no request has
// been worked on (server.Server.RestingFor; long-polls waiting do not
// count).
type quiet interface{ RestingFor() time.Duration }

// releaser gives the store's touched pages back (store.Store.Release).
type releaser interface{ Release() error }

// atRest gives memory back once queued comes to rest after work: a burst
// of large submissions or lists leaves tens of MiB of garbage in the Go
// heap, which the runtime would keep until its next collection (forced
// only every two minutes when nothing allocates) and then return to the
// kernel only slowly; and every record read leaves its page of the
// store's memory map resident. So, once no request has been worked on for
// restAfter and the heap has allocated restWork since the last time, it
// collects and returns the free memory at once (debug.FreeOSMemory, a
// millisecond or two for queued's small heap) and drops the store's pages
// (the page cache keeps them). What queued holds at rest is then what its
// active work needs. Jobs starting and ending meanwhile, and long-polls
// waiting, do not keep it from rest. allocated is the heap's running
// total of bytes allocated (heapAllocated; a test passes its own, since
// the process's total counts every test running beside it). It returns
// when stop is closed.
func atRest(srv quiet, st releaser, allocated func() uint64, stop <-chan struct{}, logf func(msg string, args ...any)) {
	var last uint64 // from start: what recovering the queues read counts too
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if srv.RestingFor() < restAfter {
			continue
		}
		if now := allocated(); now-last >= restWork {
			if err := st.Release(); err != nil {
				logf("at rest: cannot release the store's pages", "err", err)
			}
			debug.FreeOSMemory()
			last = allocated()
		}
	}
}

// heapAllocated is the Go heap's running total of bytes allocated since
// the process started: what atRest measures work by.
func heapAllocated() uint64 {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}
