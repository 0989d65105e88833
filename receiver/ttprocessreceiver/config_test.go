package ttprocessreceiver

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/ttkit/ttkit/receiver/ttprocessreceiver/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)

	customMetrics := metadata.NewDefaultMetricsBuilderConfig()
	customMetrics.Metrics.TtDeviceProcessCount.Enabled = true
	custom := createDefaultConfig()
	custom.CollectionInterval = 30 * time.Second
	custom.DriverPath = "/host/proc/driver/tenstorrent"
	custom.ProcPath = "/host/proc"
	custom.Hostname = "bh-glx-c09u02"
	custom.CommandLineRedact = []string{`--token[= ]\S+`, `password=\S+`}
	custom.MetricsBuilderConfig = customMetrics
	custom.Attribution = AttributionConfig{User: true, QueuedJob: true, K8sPodUID: true}
	custom.SysfsPath = "/host/sys"
	custom.CardTelemetry = CardTelemetryConfig{Enabled: true, HeartbeatStallWindow: time.Minute}

	tests := []struct {
		id      component.ID
		want    *Config
		wantErr string
	}{
		{id: component.NewID(metadata.Type), want: createDefaultConfig()},
		{id: component.NewIDWithName(metadata.Type, "custom"), want: custom},
		{id: component.NewIDWithName(metadata.Type, "relative_driver"), wantErr: `driver_path must be absolute: "proc/driver/tenstorrent"`},
		{id: component.NewIDWithName(metadata.Type, "relative_proc"), wantErr: `proc_path must be absolute: "./proc"`},
		{id: component.NewIDWithName(metadata.Type, "relative_sysfs"), wantErr: `sysfs_path must be absolute: "sys"`},
		{id: component.NewIDWithName(metadata.Type, "short_stall_window"), wantErr: "card_telemetry::heartbeat_stall_window must be at least collection_interval (10s), since the heartbeat is read once a cycle: 5s"},
		{id: component.NewIDWithName(metadata.Type, "zero_interval"), wantErr: "collection_interval must be positive: 0s"},
		{id: component.NewIDWithName(metadata.Type, "drop_pid"), wantErr: "metrics::tt_process::attributes cannot be set: every attribute is part of the series' identity"},
		{id: component.NewIDWithName(metadata.Type, "aggregate_count"), wantErr: "metrics::tt_process_count::aggregation_strategy cannot be set"},
		{id: component.NewIDWithName(metadata.Type, "bad_regexp"), wantErr: "command_line_redact[0] is not a valid regular expression \"secret=(\""},
	}
	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			t.Parallel()
			cfg := NewFactory().CreateDefaultConfig()
			sub, err := cm.Sub(tt.id.String())
			require.NoError(t, err)
			err = sub.Unmarshal(cfg)
			if err == nil {
				err = confmap.Validate(cfg)
			}
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			got := cfg.(*Config)
			assert.Equal(t, tt.want.ControllerConfig, got.ControllerConfig)
			assert.Equal(t, tt.want.DriverPath, got.DriverPath)
			assert.Equal(t, tt.want.ProcPath, got.ProcPath)
			assert.Equal(t, tt.want.Hostname, got.Hostname)
			assert.Equal(t, tt.want.CommandLineRedact, got.CommandLineRedact)
			assert.Equal(t, tt.want.Attribution, got.Attribution)
			assert.Equal(t, tt.want.SysfsPath, got.SysfsPath)
			assert.Equal(t, tt.want.CardTelemetry, got.CardTelemetry)
			for name, pair := range map[string][2]bool{
				"tt_process":              {tt.want.Metrics.TtProcess.Enabled, got.Metrics.TtProcess.Enabled},
				"tt_process_count":        {tt.want.Metrics.TtProcessCount.Enabled, got.Metrics.TtProcessCount.Enabled},
				"tt_device_process_count": {tt.want.Metrics.TtDeviceProcessCount.Enabled, got.Metrics.TtDeviceProcessCount.Enabled},
			} {
				assert.Equal(t, pair[0], pair[1], "%s enabled", name)
			}
		})
	}
}

func TestDefaultConfig(t *testing.T) {
	t.Parallel()
	cfg := createDefaultConfig()
	assert.Equal(t, 10*time.Second, cfg.CollectionInterval)
	// A reload (SIGHUP) restarts the pipeline with an empty exporter: the
	// first scan comes at once rather than after the controller's 1s.
	assert.Zero(t, cfg.InitialDelay)
	assert.Equal(t, "/proc/driver/tenstorrent", cfg.DriverPath)
	assert.Equal(t, "/proc", cfg.ProcPath)
	assert.Empty(t, cfg.Hostname)
	assert.Equal(t, defaultRedactions, cfg.CommandLineRedact, "redaction is on by default")
	assert.Equal(t, AttributionConfig{}, cfg.Attribution, "every attribution label is off by default")
	assert.Equal(t, "/sys", cfg.SysfsPath)
	assert.Equal(t, CardTelemetryConfig{HeartbeatStallWindow: 30 * time.Second}, cfg.CardTelemetry, "card telemetry is off by default")
	assert.True(t, cfg.Metrics.TtProcess.Enabled)
	assert.True(t, cfg.Metrics.TtProcessCount.Enabled)
	assert.False(t, cfg.Metrics.TtDeviceProcessCount.Enabled, "tt_device_process_count is opt-in")
	require.NoError(t, confmap.Validate(cfg))
}

// A scrape never outlasts its cycle: timeout is capped at the collection
// interval, and 0 (the controller's "no deadline") means the interval.
func TestScrapeTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ timeout, interval, want time.Duration }{
		{5 * time.Second, 10 * time.Second, 5 * time.Second},
		{5 * time.Second, time.Second, time.Second},
		{0, 10 * time.Second, 10 * time.Second},
	} {
		cfg := createDefaultConfig()
		cfg.Timeout, cfg.CollectionInterval = tc.timeout, tc.interval
		require.NoError(t, confmap.Validate(cfg))
		assert.Equal(t, tc.want, cfg.scrapeTimeout(), "timeout %s, interval %s", tc.timeout, tc.interval)
	}
}
