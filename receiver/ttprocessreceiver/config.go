package ttprocessreceiver // import "github.com/ttkit/ttkit/receiver/ttprocessreceiver"

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/ttkit/ttkit/receiver/ttprocessreceiver/internal/metadata"
)

// Defaults for the receiver's own settings. The collection interval matches
// the seed's tt-telemetry cadence; the paths are where Linux and the KMD put
// things.
const (
	defaultCollectionInterval = 10 * time.Second
	// defaultTimeout bounds a scrape: a procfs read can block while its
	// target is stuck in the kernel, and a scrape must still end.
	defaultTimeout    = 5 * time.Second
	defaultDriverPath = "/proc/driver/tenstorrent"
	defaultProcPath   = "/proc"
	defaultCgroupPath = "/sys/fs/cgroup"
	defaultSysfsPath  = "/sys"
	// defaultHeartbeatStallWindow is three default cycles: one missed
	// read is not yet a hung firmware.
	defaultHeartbeatStallWindow = 30 * time.Second
)

// Config is the ttprocess receiver's configuration.
type Config struct {
	scraperhelper.ControllerConfig `mapstructure:",squash"`
	metadata.MetricsBuilderConfig  `mapstructure:",squash"`

	// DriverPath is the KMD's procfs directory holding one numbered
	// directory per device, each with a pids file. Tests and containers
	// that mount the host's procfs elsewhere point it somewhere else.
	DriverPath string `mapstructure:"driver_path"`

	// ProcPath is the procfs mount the receiver reads /<pid>/cmdline,
	// comm and stat from.
	ProcPath string `mapstructure:"proc_path"`
	// cgroupPath is the cgroupfs mount, where a Slurm job's cgroup
	// directory is checked to be slurmd's (root's); defaultCgroupPath
	// when empty. Not configurable: tests point it at a fake tree.
	cgroupPath string

	// Hostname is the value of the hostname label and the host.name
	// resource attribute. Empty means the OS host name; in Kubernetes set
	// it from the node name, since a pod's own host name is the pod's.
	Hostname string `mapstructure:"hostname"`

	// CommandLineRedact lists regular expressions whose matches in a
	// command line are replaced by *** before the command_line label is set
	// and the friendly name derived; an expression with capturing groups
	// has only its groups' text replaced. A process chooses its own command
	// line, so a secret passed as an argument (--token=..., a password in a
	// URL) would otherwise be stored in Prometheus. The expressions see a
	// space inside one argument as \x1f (procscan.ArgSpace), so \S+ takes a
	// whole argument even where it held spaces. Default defaultRedactions;
	// an empty list turns redaction off.
	CommandLineRedact []string `mapstructure:"command_line_redact"`

	// SysfsPath is the sysfs mount card telemetry reads the tt-kmd
	// driver's class/tenstorrent/tenstorrent!N directories from.
	SysfsPath string `mapstructure:"sysfs_path"`

	// CardTelemetry is each card's health: temperature, power, voltage,
	// current, fan, clocks, heartbeat, thermal trips and identity.
	CardTelemetry CardTelemetryConfig `mapstructure:"card_telemetry"`

	// Attribution switches on tt_process labels that say whose each
	// holder is: user, queued_job, slurm_job, container_id, k8s_pod_uid.
	// All off by default.
	Attribution AttributionConfig `mapstructure:"attribution"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// CardTelemetryConfig is the card-health scraper's configuration.
type CardTelemetryConfig struct {
	// Enabled turns the scraper on; off by default, so that a collector
	// configured before it reports exactly what it reported before. The
	// shipped configuration turns it on.
	Enabled bool `mapstructure:"enabled"`
	// HeartbeatStallWindow is how long the firmware heartbeat may stay
	// unchanged before tt_device.heartbeat.stalled reads 1. At least the
	// collection interval: the heartbeat is read once a cycle.
	HeartbeatStallWindow time.Duration `mapstructure:"heartbeat_stall_window"`
}

// Unmarshal refuses the per-metric attributes and aggregation_strategy
// settings with a reason before decoding the rest. mdatagen offers them for
// metrics whose attributes may be dropped; here every attribute is required
// (see metadata.yaml), because dropping one merges series: with pid dropped,
// the point of a process that exited and the point of a live process with
// the same name would fold into one, and the staleness marker meant for the
// first would delete the second. Without the explanation, the collector's
// own message would only say the key is invalid.
func (cfg *Config) Unmarshal(conf *confmap.Conf) error {
	for _, m := range []string{"tt_process", "tt_process_count", "tt_device_process_count"} {
		for _, key := range []string{"attributes", "aggregation_strategy"} {
			if path := "metrics::" + m + "::" + key; conf.IsSet(path) {
				return fmt.Errorf("%s cannot be set: every attribute is part of the series' identity, and merging series "+
					"would let one process's staleness marker delete another's live series; drop or rename labels downstream "+
					"(a transform processor or Prometheus relabelling) instead", path)
			}
		}
	}
	return conf.Unmarshal(cfg)
}

// Validate rejects a configuration the receiver could not run with, naming
// the offending value.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.CollectionInterval <= 0 {
		errs = append(errs, fmt.Errorf("collection_interval must be positive: %s", cfg.CollectionInterval))
	}
	if !filepath.IsAbs(cfg.DriverPath) {
		errs = append(errs, fmt.Errorf("driver_path must be absolute: %q", cfg.DriverPath))
	}
	if !filepath.IsAbs(cfg.ProcPath) {
		errs = append(errs, fmt.Errorf("proc_path must be absolute: %q", cfg.ProcPath))
	}
	if !filepath.IsAbs(cfg.SysfsPath) {
		errs = append(errs, fmt.Errorf("sysfs_path must be absolute: %q", cfg.SysfsPath))
	}
	if w := cfg.CardTelemetry.HeartbeatStallWindow; cfg.CardTelemetry.Enabled && w < cfg.CollectionInterval {
		errs = append(errs, fmt.Errorf("card_telemetry::heartbeat_stall_window must be at least collection_interval (%s), "+
			"since the heartbeat is read once a cycle: %s", cfg.CollectionInterval, w))
	}
	if _, err := compileRedactions(cfg.CommandLineRedact); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// compileRedactions compiles the command_line_redact expressions in order.
func compileRedactions(exprs []string) ([]*regexp.Regexp, error) {
	res := make([]*regexp.Regexp, 0, len(exprs))
	for i, expr := range exprs {
		re, err := regexp.Compile(expr)
		if err != nil {
			return nil, fmt.Errorf("command_line_redact[%d] is not a valid regular expression %q: %w", i, expr, err)
		}
		res = append(res, re)
	}
	return res, nil
}

// scrapeTimeout is how long a scrape may take: timeout, capped at the
// collection interval (and the interval when timeout is 0, the controller's
// "no deadline"), since no scrape may outlast the cycle it belongs to.
func (cfg *Config) scrapeTimeout() time.Duration {
	if cfg.Timeout > 0 && cfg.Timeout < cfg.CollectionInterval {
		return cfg.Timeout
	}
	return cfg.CollectionInterval
}

// defaultRedactions is the default command_line_redact: the value of any
// option or assignment whose name mentions a password, secret, token,
// credentials or an API, access or private key (--password "correct horse",
// --db-password=pw, --auth-token x, API_KEY=x), and the userinfo of any URL
// (https://user:secret@host becomes https://***@host). A configured list
// replaces it, so repeat these to extend them.
var defaultRedactions = []string{
	`(?i)(?:^|\s)-{1,2}[\w.-]*(?:password|passwd|passphrase|secret|token|credentials?|api[-_]?key|access[-_]?key|private[-_]?key)[\w.-]*[= ](\S+)`,
	`(?i)(?:^|\s)[\w.]*(?:password|passwd|passphrase|secret|token|credentials?|api[-_]?key|access[-_]?key|private[-_]?key)[\w.]*=(\S+)`,
	`(?i)\b[a-z][a-z0-9+.-]*://([^/@\s]+)@`,
}

func createDefaultConfig() *Config {
	cc := scraperhelper.NewDefaultControllerConfig()
	cc.CollectionInterval = defaultCollectionInterval
	cc.Timeout = defaultTimeout
	// The first scan at start, not a second later: a reload (SIGHUP)
	// rebuilds the pipeline with an empty Prometheus exporter, and until
	// the first scan /metrics would hold no tt_process at all.
	cc.InitialDelay = 0
	return &Config{
		ControllerConfig:     cc,
		MetricsBuilderConfig: metadata.NewDefaultMetricsBuilderConfig(),
		DriverPath:           defaultDriverPath,
		ProcPath:             defaultProcPath,
		SysfsPath:            defaultSysfsPath,
		CardTelemetry:        CardTelemetryConfig{HeartbeatStallWindow: defaultHeartbeatStallWindow},
		CommandLineRedact:    slices.Clone(defaultRedactions),
	}
}
