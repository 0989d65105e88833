package ttprocessreceiver

import (
	"context"
	"path/filepath"
	"strconv"
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

// BenchmarkScrapeHolders measures a steady-state scrape of one device held
// by 1,000 and by 8,000 processes (a fake procfs, since no test host runs
// thousands of real holders cheaply). make bench prints the 8,000/1,000
// ratio next to the linear one, 8: a cycle's cost must grow with the
// holders, not with their square.
func BenchmarkScrapeHolders(b *testing.B) {
	for _, n := range []int{1000, 8000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			dir := b.TempDir()
			tree := kmdtest.NewTree(b, filepath.Join(dir, "driver"))
			proc := filepath.Join(dir, "proc")
			pids := kmdtest.FakeProcs(b, proc, 100000, n)
			tree.SetPids(0, pids...)
			cfg := createDefaultConfig()
			cfg.DriverPath = tree.Dir
			cfg.ProcPath = proc
			cfg.Hostname = "bench"
			s := newScraper(cfg, receivertest.NewNopSettings(metadata.Type))
			s.selfPID = kmdtest.FakeSelfPID
			if err := s.start(context.Background(), componenttest.NewNopHost()); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.shutdown(context.Background()) })
			if _, err := s.scrape(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				md, err := s.scrape(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				if got := md.DataPointCount(); got != n+1 {
					b.Fatalf("%d points, want %d", got, n+1)
				}
			}
		})
	}
}

// BenchmarkCardScrape measures a steady-state card-health scrape of 32
// Blackhole cards with every card metric on (as the shipped configuration
// has them), through the scraper, pdata and all. Target: <= 1 ms.
func BenchmarkCardScrape(b *testing.B) {
	fs := kmdtest.BusySysfs(b, b.TempDir(), benchDevices)
	cfg := createDefaultConfig()
	cfg.SysfsPath = fs.Root
	cfg.Hostname = "bench"
	cfg.CardTelemetry.Enabled = true
	m := &cfg.Metrics
	for _, enabled := range []*bool{&m.TtDeviceFanSpeed.Enabled, &m.TtDeviceFanSpeedMax.Enabled, &m.TtDeviceThermalTrips.Enabled,
		&m.TtDeviceTemperatureMax.Enabled, &m.TtDevicePowerMax.Enabled, &m.TtDeviceVoltageMax.Enabled, &m.TtDeviceCurrentMax.Enabled} {
		*enabled = true
	}
	s := newCardScraper(cfg, receivertest.NewNopSettings(metadata.Type))
	if err := s.start(context.Background(), componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.shutdown(context.Background()) })
	// Per card: five sensors and their limits, three clocks, the
	// heartbeat, thermal trips and the identity.
	want := benchDevices * (5*2 + 3 + 1 + 1 + 1)
	b.ReportAllocs()
	for b.Loop() {
		md, err := s.scrape(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if n := md.DataPointCount(); n != want {
			b.Fatalf("%d points, want %d", n, want)
		}
	}
}
