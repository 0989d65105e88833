package queuedproc

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

// Submission is one acknowledged POST /queue and how long it took.
type Submission struct {
	api.QueueResponse
	// Latency is the client-side time from sending to the parsed answer.
	Latency time.Duration
	// First marks its client's first submission, which also opened the
	// client's connection: in a storm of fresh clients these arrive all
	// at once, and they, not the steady stream after them, make a storm's
	// p99 (issue 41).
	First bool
}

// FirstAndLater splits subs' latencies into those of each client's first
// submission and those of the rest.
func FirstAndLater(subs []Submission) (first, later []time.Duration) {
	for _, s := range subs {
		if s.First {
			first = append(first, s.Latency)
		} else {
			later = append(later, s.Latency)
		}
	}
	return first, later
}

// Storm submits n jobs from clients concurrent goroutines, each with its
// own api.Client, and returns the acknowledged submissions in the order
// their answers arrived. req builds the i-th request. The first error
// stops every client.
func Storm(ctx context.Context, d *Daemon, clients, n int, req func(i int) api.QueueRequest) ([]Submission, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	go func() {
		defer close(next)
		for i := 0; i < n; i++ {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	var (
		mu      sync.Mutex
		subs    = make([]Submission, 0, n)
		firstEr error
		wg      sync.WaitGroup
	)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := d.Client()
			defer c.Close()
			first := true
			for i := range next {
				t0 := time.Now()
				resp, err := c.Queue(ctx, req(i))
				lat := time.Since(t0)
				mu.Lock()
				if err != nil {
					if firstEr == nil {
						firstEr = fmt.Errorf("submission %d: %w", i, err)
						cancel()
					}
					mu.Unlock()
					return
				}
				subs = append(subs, Submission{QueueResponse: resp, Latency: lat, First: first})
				mu.Unlock()
				first = false
			}
		}()
	}
	wg.Wait()
	return subs, firstEr
}

// WaitDone long-polls GET /result for every id from parallel goroutines
// until each job is done (or ctx ends) and returns the records by id.
func WaitDone(ctx context.Context, d *Daemon, ids []string, parallel int) (map[string]api.Job, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan string)
	go func() {
		defer close(next)
		for _, id := range ids {
			select {
			case next <- id:
			case <-ctx.Done():
				return
			}
		}
	}()
	var (
		mu      sync.Mutex
		jobs    = make(map[string]api.Job, len(ids))
		firstEr error
		wg      sync.WaitGroup
	)
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := d.Client()
			defer c.Close()
			for id := range next {
				j, err := c.WaitResult(ctx, id)
				mu.Lock()
				if err != nil {
					if firstEr == nil {
						firstEr = fmt.Errorf("waiting for job %s: %w", id, err)
						cancel()
					}
					mu.Unlock()
					return
				}
				jobs[id] = j
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return jobs, firstEr
}

// Percentile returns the p-th percentile (0 < p <= 100) of ds by the
// nearest-rank method; ds is sorted in place.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	rank := int(float64(len(ds))*p/100+0.999999) - 1
	return ds[min(max(rank, 0), len(ds)-1)]
}
