//go:build stress

package stress

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttkit/ttkit/test/stress/queuedproc"
)

// termCycles is the number of SIGTERM cycles; each stop waits up to a
// second for the half-sent request, so fewer than the kill -9 cycles.
const termCycles = 40

// TestTermStorm is TestCrashStorm with graceful stops: each cycle ends with
// SIGTERM while an idle connection and a half-sent request are open and
// two kills race for each of two acknowledged jobs. Beyond the crash
// storm's checks, a job whose process never started must not end
// interrupted (it stays queued and runs later), each race of kills takes
// effect once (the queued count drains to exactly 0), and every stop ends
// within the kill grace plus a few seconds.
func TestTermStorm(t *testing.T) {
	var slowest time.Duration
	runStorm(t, "SIGTERM", termCycles, func(t *testing.T, d *queuedproc.Daemon, acked func() []string) {
		host := strings.TrimPrefix(d.URL, "http://")
		idle, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer idle.Close()
		half, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer half.Close()
		fmt.Fprintf(half, "POST /queue HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"cmd\":", host, d.Token)

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c := d.Client()
		defer c.Close()
		ids := acked()
		var wg sync.WaitGroup
		for i := 0; i < len(ids) && i < 2; i++ {
			id := ids[len(ids)-1-i] // the newest: most likely still queued
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c.Kill(ctx, id) // one takes effect; the other is told it is finished
				}()
			}
		}
		wg.Wait()
		began := time.Now()
		if err := d.Stop(20 * time.Second); err != nil {
			t.Fatalf("SIGTERM: %v", err)
		}
		took := time.Since(began)
		slowest = max(slowest, took)
		if limit := 8 * time.Second; took > limit { // kill grace 1 s, HTTP drain 1 s, records; the old stop took 10 s
			t.Errorf("a stop took %v; want under %v", took, limit)
		}
	})
	t.Logf("slowest stop %v (kill grace 1 s)", slowest.Round(time.Millisecond))
}
