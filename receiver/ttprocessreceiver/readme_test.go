package ttprocessreceiver

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"

	"github.com/ttkit/ttkit/receiver/ttprocessreceiver/internal/metadata"
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
	assert.Equal(t, want.SysfsPath, cfg.SysfsPath)
	assert.Equal(t, want.CardTelemetry, cfg.CardTelemetry)
	assert.Equal(t, enabledSwitches(want.Metrics), enabledSwitches(cfg.Metrics), "the README's metric switches are the defaults")
	metrics, err := sub.Sub("metrics")
	require.NoError(t, err)
	for _, name := range metricNames() {
		assert.Contains(t, metrics.ToStringMap(), name, "the README's example lacks metrics.%s", name)
	}
	for _, key := range []string{"collection_interval", "timeout", "initial_delay", "driver_path", "proc_path", "hostname", "command_line_redact", "attribution", "sysfs_path", "card_telemetry", "metrics"} {
		assert.Contains(t, raw, key, "the README's example lacks %s", key)
	}
}

// metricNames are the names of every metric in metadata.yaml.
func metricNames() []string {
	var names []string
	v := reflect.ValueOf(metadata.MetricsInfo)
	for i := 0; i < v.NumField(); i++ {
		names = append(names, v.Field(i).FieldByName("Name").String())
	}
	return names
}

// enabledSwitches is the enabled switch of every metric, by field.
func enabledSwitches(m metadata.MetricsConfig) map[string]bool {
	out := map[string]bool{}
	v := reflect.ValueOf(m)
	for i := 0; i < v.NumField(); i++ {
		out[v.Type().Field(i).Name] = v.Field(i).FieldByName("Enabled").Bool()
	}
	return out
}
