package ttprocessreceiver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/receiver/ttprocessreceiver/internal/metadata"
)

// nsHelperEnv, when set, makes TestPrivateNamespaceHelper act: it is the
// receiver run inside a private PID namespace by TestScrape_InPrivatePIDNamespace.
const nsHelperEnv = "TTKIT_NS_HELPER_DRIVER"

// TestPrivateNamespaceHelper is not a test of its own: run by
// TestScrape_InPrivatePIDNamespace inside unshare, it starts the receiver
// with the default proc_path, scrapes the driver tree it is given once,
// and prints what the receiver logged and reported.
func TestPrivateNamespaceHelper(t *testing.T) {
	driver := os.Getenv(nsHelperEnv)
	if driver == "" {
		return // run only inside the namespace
	}
	// The driver renders our own PID, here 1, and every other holder as 0.
	tree := kmdtest.NewTree(t, driver)
	tree.SetPids(0, os.Getpid(), 0, 0)
	cfg := createDefaultConfig()
	cfg.DriverPath = driver
	cfg.Hostname = "ns"
	core, logs := observer.New(zapcore.WarnLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	s := newScraper(cfg, set)
	require.NoError(t, s.start(context.Background(), componenttest.NewNopHost()))
	defer s.shutdown(context.Background())
	md, err := s.scrape(context.Background())
	require.NoError(t, err)
	fmt.Printf("SELF %d\n", os.Getpid())
	fmt.Printf("COUNT %d\n", count(t, md))
	fmt.Printf("SERIES %d\n", len(points(md, "tt_process")))
	for _, e := range logs.All() {
		fmt.Printf("%s %s\n", e.Level.CapitalString(), e.Message)
	}
}

// TestScrape_InPrivatePIDNamespace runs the receiver in a real private PID
// namespace (as root, through unshare), the way a container without the host
// PID namespace runs it. With its own procfs mounted (unshare --mount-proc)
// it is PID 1 and warns with the remedy; with the host's procfs left at
// /proc, that procfs is another namespace's, so it names nothing and says
// why.
func TestScrape_InPrivatePIDNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("unshare --pid needs root (CI runs as root)")
	}
	unshare, err := exec.LookPath("unshare")
	require.NoError(t, err, "unshare (util-linux) is needed")
	run := func(t *testing.T, flags ...string) string {
		t.Helper()
		args := append(flags, "--", os.Args[0], "-test.run=^TestPrivateNamespaceHelper$", "-test.count=1")
		cmd := exec.Command(unshare, args...)
		cmd.Env = append(os.Environ(), nsHelperEnv+"="+filepath.Join(t.TempDir(), "driver"))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}

	t.Run("own procfs", func(t *testing.T) {
		out := run(t, "--pid", "--fork", "--mount-proc")
		assert.Contains(t, out, "SELF 1\n")
		assert.Contains(t, out, "COUNT 1\n", "the PID-0 holders collapse into one")
		assert.Contains(t, out, "SERIES 0\n")
		assert.Contains(t, out, "WARN The collector's own PID is 1")
		assert.Contains(t, out, "hostPID: true")
		assert.NotContains(t, out, "ERROR")
	})
	t.Run("host procfs", func(t *testing.T) {
		out := run(t, "--pid", "--fork")
		assert.Contains(t, out, "SELF 1\n")
		assert.Contains(t, out, "ERROR proc_path is not this collector's PID namespace's procfs")
		assert.True(t, strings.Contains(out, "COUNT 1\n") && strings.Contains(out, "SERIES 0\n"), "%s", out)
	})
}
