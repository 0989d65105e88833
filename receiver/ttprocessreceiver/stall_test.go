package ttprocessreceiver

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/scraper/scrapererror"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/internal/procscan"
)

// scrapeWithin scrapes on another goroutine and fails the test if the
// scrape has not returned within d (the stuck read is then released by the
// fifo's cleanup, so the goroutine ends).
func scrapeWithin(t *testing.T, b *testBundle, d time.Duration) (pmetric.Metrics, error) {
	t.Helper()
	type out struct {
		md  pmetric.Metrics
		err error
	}
	ch := make(chan out, 1)
	go func() {
		md, err := b.s.scrape(context.Background())
		ch <- out{md, err}
	}()
	select {
	case o := <-ch:
		return o.md, o.err
	case <-time.After(d):
		t.Fatalf("scrape still running after %s", d)
		return pmetric.Metrics{}, nil
	}
}

// A holder whose cmdline read blocks does not stall the scrape: it is
// reported under its PID for as long as the read is stuck, the others are
// named, and once the read returns the PID-named series ends and the real
// one starts.
func TestScrape_StuckCmdlineDoesNotStall(t *testing.T) {
	t.Parallel()
	b := setup(t, func(cfg *Config) { cfg.Timeout = 400 * time.Millisecond })
	b.host.process(4242, 9001, "python3", "python3", "train.py")
	release := kmdtest.Fifo(t, filepath.Join(b.host.proc, "4242", "cmdline"))
	b.host.process(4243, 9002, "sleep", "sleep", "600")
	b.host.pids(0, 4242, 4243)
	b.start(t)

	for range 2 {
		md, err := scrapeWithin(t, b, 5*time.Second)
		require.NoError(t, err)
		got := processPoints(t, md)
		require.Len(t, got, 2)
		assert.Equal(t, "4242", attr(got["4242"], "friendly_name"), "the spec's fallback while the read is stuck")
		assert.Equal(t, "sleep", attr(got["4243"], "friendly_name"))
	}

	release("python3\x00train.py\x00")
	var md pmetric.Metrics
	require.Eventually(t, func() bool {
		var err error
		md, err = scrapeWithin(t, b, 5*time.Second)
		for _, dp := range points(md, "tt_process") {
			if attr(dp, "pid") == "4242" && !stale(dp) && attr(dp, "friendly_name") != "4242" {
				return err == nil
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond)
	old, fresh := replaced(t, filterPID(md, "4242"))
	assert.Equal(t, "4242", attr(old, "friendly_name"), "the PID-named series ends")
	assert.Equal(t, "train.py", attr(fresh, "friendly_name"))
}

// A pids file whose read blocks ends the scrape at its timeout with an
// error; the series already known are held meanwhile.
func TestScrape_StuckPidsFileEndsAtTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, func(cfg *Config) { cfg.Timeout = 300 * time.Millisecond })
	b.host.process(4242, 9001, "python3", "python3", "train.py")
	b.host.pids(0, 4242)
	b.start(t)
	require.Len(t, processPoints(t, b.scrape(t)), 1)

	release := kmdtest.Fifo(t, b.host.driver.PidsPath(0))
	for range 2 {
		md, err := scrapeWithin(t, b, 5*time.Second)
		require.Error(t, err)
		var partial scrapererror.PartialScrapeError
		assert.True(t, errors.As(err, &partial), "error %v", err)
		// PartialScrapeError does not unwrap: its text is all there is.
		assert.Contains(t, err.Error(), (&procscan.ScanTimeoutError{Err: context.DeadlineExceeded}).Error())
		got := processPoints(t, md)
		require.Len(t, got, 1)
		assert.False(t, stale(got["4242"]), "held while the scan is stuck")
		assert.EqualValues(t, 1, count(t, md))
	}
	release("4242\n")
}

// filterPID keeps only the tt_process points of one pid.
func filterPID(md pmetric.Metrics, pid string) pmetric.Metrics {
	out := pmetric.NewMetrics()
	md.CopyTo(out)
	out.ResourceMetrics().RemoveIf(func(rm pmetric.ResourceMetrics) bool {
		rm.ScopeMetrics().RemoveIf(func(sm pmetric.ScopeMetrics) bool {
			sm.Metrics().RemoveIf(func(m pmetric.Metric) bool {
				if m.Name() != "tt_process" {
					return true
				}
				m.Gauge().DataPoints().RemoveIf(func(dp pmetric.NumberDataPoint) bool { return attr(dp, "pid") != pid })
				return false
			})
			return false
		})
		return false
	})
	return out
}

// A PID reused by a process whose command line read blocks: the start time
// proves another process, so the old series ends at once and the new one is
// reported under its PID until its read returns.
func TestScrape_ReusedPIDWithStuckRead(t *testing.T) {
	t.Parallel()
	b := setup(t, func(cfg *Config) { cfg.Timeout = 400 * time.Millisecond })
	b.host.process(4242, 9001, "python3", "python3", "train.py")
	b.host.pids(0, 4242)
	b.start(t)
	require.Equal(t, "train.py", attr(processPoints(t, b.scrape(t))["4242"], "friendly_name"))

	b.host.process(4242, 12345, "python3", "python3", "eval.py")
	release := kmdtest.Fifo(t, filepath.Join(b.host.proc, "4242", "cmdline"))
	md, err := scrapeWithin(t, b, 5*time.Second)
	require.NoError(t, err)
	old, fresh := replaced(t, md)
	assert.Equal(t, "train.py", attr(old, "friendly_name"), "the old process's series ends")
	assert.Equal(t, "4242", attr(fresh, "friendly_name"), "the new one is named after its PID for now")
	release("python3\x00eval.py\x00")
}
