package ttprocessreceiver

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/receiver/ttprocessreceiver/internal/metadata"
)

const (
	benchDevices   = 32
	benchProcesses = 64
)

// BenchmarkScrape measures a steady-state scrape of a full host (32
// devices, 64 processes, several descriptors each) through the scraper,
// pdata and all. Target: within 3x BenchmarkScrapeFloor.
func BenchmarkScrape(b *testing.B) {
	tree, _ := kmdtest.BusyHost(b, b.TempDir(), benchDevices, benchProcesses, 3)
	cfg := createDefaultConfig()
	cfg.DriverPath = tree.Dir
	cfg.Hostname = "bench"
	s := newScraper(cfg, receivertest.NewNopSettings(metadata.Type))
	if err := s.start(context.Background(), componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.shutdown(context.Background()) })
	if _, err := s.scrape(context.Background()); err != nil { // first sight of every process
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		md, err := s.scrape(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if n := md.DataPointCount(); n != benchProcesses+1 {
			b.Fatalf("%d points, want %d", n, benchProcesses+1)
		}
	}
}

// BenchmarkScrapeFloor is the same host's floor: read every pids file and
// stat every /proc/<pid>, nothing more.
func BenchmarkScrapeFloor(b *testing.B) {
	tree, pids := kmdtest.BusyHost(b, b.TempDir(), benchDevices, benchProcesses, 3)
	floor := kmdtest.NewFloor(tree, benchDevices, pids)
	b.ReportAllocs()
	for b.Loop() {
		if err := floor.Run(); err != nil {
			b.Fatal(err)
		}
	}
}
