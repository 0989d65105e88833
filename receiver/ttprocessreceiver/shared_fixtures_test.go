package ttprocessreceiver

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttkit/ttkit/internal/kmdtest"
)

// TestScrape_PytestCorpus reports each pytest command line of the shared
// corpus (testdata/friendlyname) with the friendly name the corpus gives
// it, through a fake host: the name the receiver shows is Derive's, end to
// end.
func TestScrape_PytestCorpus(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	corpus := kmdtest.Corpus(t, "pytest-corpus")
	var pids []int
	for i, c := range corpus {
		pid := 5000 + i
		argv := strings.Fields(c.CommandLine)
		b.host.process(pid, uint64(100+i), argv[0], argv...)
		pids = append(pids, pid)
	}
	b.host.pids(0, pids...)
	b.start(t)
	got := processPoints(t, b.scrape(t))
	require.Len(t, got, len(corpus))
	for i, c := range corpus {
		dp := got[strconv.Itoa(5000+i)]
		assert.Equal(t, c.FriendlyName, attr(dp, "friendly_name"), "friendly name of %q", c.CommandLine)
	}
}

// TestScrape_ContainerView reads the shared container's-view tree
// (testdata/kmd/container-view): every holder is outside the collector's
// PID namespace (0 lines), so the count is a floor of one and no process
// is named.
func TestScrape_ContainerView(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.DriverPath = kmdtest.CopyTree(t, "container-view") })
	b.start(t)
	md := b.scrape(t)
	assert.Empty(t, processPoints(t, md))
	assert.Equal(t, int64(1), count(t, md))
}
