package ttprocessreceiver

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
)

// TestREADME_ConfigurationIsTheDefault: the README's example, which lists
// every key "with its default", loads and equals the default
// configuration, so the page cannot drift from the code.
func TestREADME_ConfigurationIsTheDefault(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), "```yaml\n")
	require.True(t, ok, "README.md has no yaml example")
	block, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	ret, err := confmap.NewRetrievedFromYAML([]byte(block))
	require.NoError(t, err)
	doc, err := ret.AsConf()
	require.NoError(t, err)
	sub, err := doc.Sub("receivers::ttprocess")
	require.NoError(t, err)
	raw := sub.ToStringMap()

	cfg := createDefaultConfig()
	require.NoError(t, sub.Unmarshal(cfg))
	require.NoError(t, confmap.Validate(cfg))
	want := createDefaultConfig()
	assert.Equal(t, want.ControllerConfig, cfg.ControllerConfig)
	assert.Equal(t, want.DriverPath, cfg.DriverPath)
	assert.Equal(t, want.ProcPath, cfg.ProcPath)
	assert.Equal(t, want.Hostname, cfg.Hostname)
	assert.Equal(t, defaultRedactions, cfg.CommandLineRedact)
	assert.Equal(t, want.Attribution, cfg.Attribution)
	m, w := cfg.Metrics, want.Metrics
	assert.Equal(t, []bool{w.TtProcess.Enabled, w.TtProcessCount.Enabled, w.TtDeviceProcessCount.Enabled},
		[]bool{m.TtProcess.Enabled, m.TtProcessCount.Enabled, m.TtDeviceProcessCount.Enabled})
	for _, key := range []string{"collection_interval", "timeout", "initial_delay", "driver_path", "proc_path", "hostname", "command_line_redact", "attribution", "metrics"} {
		assert.Contains(t, raw, key, "the README's example lacks %s", key)
	}
}
