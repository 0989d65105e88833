package ttprocessreceiver

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap/zapcore"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/receiver/ttprocessreceiver/internal/metadata"
)

// A device's pids file that vanishes between the listing and the read (the
// directory is still there) is a failed read, not an empty device: the
// series of its holders must be held.
func TestScrape_VanishedPidsFileHoldsTheSeries(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.host.process(4242, 9001, "python3", "python3", "train.py")
	b.host.process(4243, 9002, "python3", "python3", "eval.py")
	b.host.pids(0, 4242)
	b.host.pids(1, 4243)
	b.start(t)
	require.Len(t, processPoints(t, b.scrape(t)), 2)

	require.NoError(t, os.Remove(b.host.driver.PidsPath(1)))
	md, err := b.s.scrape(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "device 1")
	got := processPoints(t, md)
	require.Len(t, got, 2)
	assert.False(t, stale(got["4243"]), "a holder of the vanished file keeps its series")
	assert.EqualValues(t, 2, count(t, md))
}

// The whole driver directory failing to list (here: it is a file) holds
// every series too.
func TestScrape_UnlistableDriverHoldsEverySeries(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.host.process(4242, 9001, "python3", "python3", "train.py")
	b.host.pids(0, 4242)
	b.start(t)
	b.scrape(t)

	require.NoError(t, os.RemoveAll(b.host.driver.Dir))
	require.NoError(t, os.WriteFile(b.host.driver.Dir, nil, 0o644))
	md, err := b.s.scrape(context.Background())
	require.Error(t, err)
	got := processPoints(t, md)
	require.Len(t, got, 1)
	assert.False(t, stale(got["4242"]))
}

// Processes that start and exit every cycle, for many cycles: every one is
// named while it runs and retired once it is gone, and neither the series
// the receiver remembers, the descriptors it holds, nor its heap grow.
func TestScrape_ChurnLeaksNothing(t *testing.T) {
	const (
		cycles    = 150
		perCycle  = 4
		warmCycle = 30
	)
	dir := t.TempDir()
	tree := kmdtest.NewTree(t, filepath.Join(dir, "driver"))
	steady := kmdtest.Start(t, dir, nil, "sleep", "600")
	cfg := createDefaultConfig()
	cfg.DriverPath = tree.Dir
	cfg.Hostname = "churn"
	s := newScraper(cfg, receivertest.NewNopSettings(metadata.Type))
	require.NoError(t, s.start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, s.shutdown(context.Background())) })

	// The churning processes are started and reaped here rather than
	// through kmdtest.Start, whose per-process cleanup would itself grow
	// the heap this test measures.
	var prev []*exec.Cmd
	t.Cleanup(func() { reap(prev) })
	var heapWarm uint64
	var fdsWarm int
	for cycle := range cycles {
		cur := make([]*exec.Cmd, perCycle)
		pids := []int{steady.PID()}
		for i := range cur {
			cur[i] = exec.Command("sleep", "600")
			require.NoError(t, cur[i].Start())
			pids = append(pids, cur[i].Process.Pid)
		}
		reap(prev)
		tree.SetPids(cycle%2, pids...)
		tree.SetPids((cycle+1)%2, steady.PID())

		md, err := s.scrape(context.Background())
		require.NoError(t, err)
		got := processPoints(t, md)
		for _, p := range cur {
			dp, ok := got[strconv.Itoa(p.Process.Pid)]
			require.True(t, ok, "cycle %d: pid %d not reported", cycle, p.Process.Pid)
			require.False(t, stale(dp))
		}
		for _, p := range prev {
			dp, ok := got[strconv.Itoa(p.Process.Pid)]
			require.True(t, ok && stale(dp), "cycle %d: pid %d not retired", cycle, p.Process.Pid)
		}
		ending := perCycle * min(cycle, removalRepeats)
		require.Len(t, got, 1+perCycle+ending, "cycle %d: live, new and recently retired series only", cycle)
		require.Len(t, s.series, 1+perCycle, "cycle %d: remembered series", cycle)
		require.Len(t, s.ending, perCycle*min(cycle, removalRepeats-1), "cycle %d: removals still to repeat", cycle)
		prev = cur

		if cycle == warmCycle {
			heapWarm, fdsWarm = heapInUse(), openFDs(t)
		}
	}
	heap, fds := heapInUse(), openFDs(t)
	t.Logf("after %d cycles of %d new processes: heap %d -> %d bytes, open fds %d -> %d",
		cycles, perCycle, heapWarm, heap, fdsWarm, fds)
	// The scanner holds one descriptor per cached process, so a cache that
	// forgot nothing would show here first.
	assert.LessOrEqual(t, fds, fdsWarm, "descriptors leak")
	assert.Less(t, heap, heapWarm+256<<10, "heap grows with churn")
}

func reap(cmds []*exec.Cmd) {
	for _, c := range cmds {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(entries)
}

// A holder that exits while the driver still lists it (the driver drops a
// PID's descriptors a moment after the exit) keeps its series and labels:
// no other process can be shown to hold the PID.
func TestScrape_ExitedHolderKeepsItsLabels(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tree := kmdtest.NewTree(t, filepath.Join(dir, "driver"))
	p := kmdtest.Start(t, dir, nil, "sleep", "600")
	p.WaitCommandLine(t, 10*time.Second)
	tree.SetPids(0, p.PID())
	cfg := createDefaultConfig()
	cfg.DriverPath = tree.Dir
	cfg.Hostname = "exit"
	s := newScraper(cfg, receivertest.NewNopSettings(metadata.Type))
	require.NoError(t, s.start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, s.shutdown(context.Background())) })
	pid := strconv.Itoa(p.PID())
	md, err := s.scrape(context.Background())
	require.NoError(t, err)
	require.Equal(t, "sleep", attr(processPoints(t, md)[pid], "friendly_name"))

	p.Stop()
	for range 2 {
		md, err = s.scrape(context.Background())
		require.NoError(t, err)
		dps := points(md, "tt_process")
		require.Len(t, dps, 1, "the series neither ends nor gains a PID-named twin")
		assert.False(t, stale(dps[0]))
		assert.Equal(t, "sleep", attr(dps[0], "friendly_name"))
		assert.Equal(t, "sleep 600", attr(dps[0], "command_line"))
	}

	tree.SetPids(0)
	md, err = s.scrape(context.Background())
	require.NoError(t, err)
	require.True(t, stale(processPoints(t, md)[pid]), "retired once the driver stops listing it")
}

// proc_path from another PID namespace (hostPID off, the host's procfs
// mounted at /host/proc): the pids file's PIDs are the collector's
// namespace's, and looking them up in the host's procfs would attach some
// unrelated process's command line to them. The receiver names nothing,
// counts, and says why and how to fix it.
func TestScrape_ProcPathOfAnotherNamespaceNamesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	populate(b.host)
	// The procfs's self is some other PID: not our namespace's procfs.
	b.host.selfIs(777)
	b.start(t)
	md := b.scrape(t)
	assert.Empty(t, points(md, "tt_process"), "no PID is named from a foreign procfs")
	assert.EqualValues(t, 4, count(t, md), "the count is still exact")
	errs := b.logs.FilterLevelExact(zapcore.ErrorLevel).All()
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Message, "proc_path")
	assert.Contains(t, errs[0].Message, "hostPID: true")
	assert.Contains(t, errs[0].Message, b.host.proc)
}

// The neighbour of TestScrape_ExitedHolderKeepsItsLabels: the holder's only
// device cannot be read in the cycle it exits, so the scanner forgets it;
// when the device reads again, the driver still lists the PID, and the
// scanner meets it as new with nothing to read. The series still keeps its
// labels: nothing shows another process holds the PID.
func TestScrape_ExitedHolderOnAnUnreadableDeviceKeepsItsLabels(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.host.process(4242, 9001, "python3", "python3", "train.py")
	b.host.pids(1, 4242)
	b.start(t)
	require.Equal(t, "train.py", attr(processPoints(t, b.scrape(t))["4242"], "friendly_name"))

	// It exits (its stat reads nothing any more) while device 1 is unreadable.
	b.host.write(filepath.Join(b.host.proc, "4242", "stat"), "")
	require.NoError(t, os.Remove(filepath.Join(b.host.proc, "4242", "cmdline")))
	require.NoError(t, os.Remove(filepath.Join(b.host.proc, "4242", "comm")))
	b.host.breakPids(1)
	_, err := b.s.scrape(context.Background())
	require.Error(t, err)

	b.host.pids(1, 4242)
	for range 2 {
		dps := points(b.scrape(t), "tt_process")
		require.Len(t, dps, 1, "no PID-named twin")
		assert.False(t, stale(dps[0]))
		assert.Equal(t, "train.py", attr(dps[0], "friendly_name"))
	}
}
