// Package telemetry gives queued an OpenTelemetry meter provider, set up
// from the standard OTEL_* environment variables as every OpenTelemetry
// SDK reads them, so the daemon's metrics reach an OTLP receiver (such as
// otelcol-tt's) only when the operator asks for it.
//
// Metrics are exported over OTLP/HTTP with protobuf payloads when
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is
// set. With neither, the provider is a no-op: no exporter, no goroutine,
// nothing recorded. The exporter and the periodic reader read the rest of
// their settings from the process environment themselves:
// OTEL_METRIC_EXPORT_INTERVAL (milliseconds, default 60000),
// OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, _CERTIFICATE and
// OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE, among others. The
// resource carries service.name (queued, or OTEL_SERVICE_NAME),
// service.version, service.instance.id and host.name (the host name),
// and whatever OTEL_RESOURCE_ATTRIBUTES adds.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
)

// Environment variables this package decides by; the SDK reads the others.
const (
	EnvEndpoint        = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvMetricsEndpoint = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
	EnvProtocol        = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvMetricsProtocol = "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"
	EnvMetricsExporter = "OTEL_METRICS_EXPORTER"
	EnvSDKDisabled     = "OTEL_SDK_DISABLED"
)

// ServiceName is the default service.name; in Prometheus it becomes the
// job label of every queued metric.
const ServiceName = "queued"

// ErrUnsupported means the environment asks for an exporter or protocol
// this build does not have.
var ErrUnsupported = errors.New("unsupported OpenTelemetry setting")

// Provider is the daemon's meter provider. Shut it down on exit so the
// last measurements are sent.
type Provider struct {
	metric.MeterProvider
	sdk *sdkmetric.MeterProvider // nil when nothing is exported
	// Endpoint is where metrics are sent; "" when they are not.
	Endpoint string
}

// Enabled reports whether metrics are exported.
func (p *Provider) Enabled() bool { return p.sdk != nil }

// Shutdown exports what was recorded since the last export and stops the
// exporter, within ctx. It does nothing for a no-op provider.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p.sdk == nil {
		return nil
	}
	if err := p.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("flushing metrics to %s: %w", p.Endpoint, err)
	}
	return nil
}

// Setup reads the environment and returns the provider: a no-op one
// unless an OTLP endpoint is set (or when OTEL_SDK_DISABLED=true or
// OTEL_METRICS_EXPORTER=none). Export errors go to log. version becomes
// service.version.
func Setup(ctx context.Context, version string, log *slog.Logger) (*Provider, error) {
	off := &Provider{MeterProvider: noop.NewMeterProvider()}
	if strings.EqualFold(os.Getenv(EnvSDKDisabled), "true") {
		return off, nil
	}
	switch v := os.Getenv(EnvMetricsExporter); v {
	case "", "otlp":
	case "none":
		return off, nil
	default:
		return nil, fmt.Errorf("%s=%q: %w (use otlp or none)", EnvMetricsExporter, v, ErrUnsupported)
	}
	endpoint := os.Getenv(EnvMetricsEndpoint)
	if endpoint == "" {
		base := os.Getenv(EnvEndpoint)
		if base == "" {
			return off, nil
		}
		endpoint = strings.TrimRight(base, "/") + "/v1/metrics"
	}
	for _, name := range []string{EnvMetricsProtocol, EnvProtocol} {
		v := os.Getenv(name)
		if v == "" {
			continue
		}
		if v != "http/protobuf" {
			return nil, fmt.Errorf("%s=%q: %w; queued sends OTLP over HTTP (http/protobuf, port 4318)", name, v, ErrUnsupported)
		}
		break // the metrics-specific one, when set, decides
	}
	exp, err := otlpmetrichttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("creating the OTLP metrics exporter for %s: %w", endpoint, err)
	}
	host, _ := os.Hostname()
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(
			attribute.String("service.name", ServiceName),
			attribute.String("service.version", version),
			attribute.String("service.instance.id", host),
			attribute.String("host.name", host)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES override the above
	)
	if err != nil {
		// A malformed OTEL_RESOURCE_ATTRIBUTES: the resource is still
		// usable with what did parse.
		log.Warn("building the metrics resource", "err", err)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("exporting metrics", "endpoint", endpoint, "err", err)
	}))
	sdk := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	return &Provider{MeterProvider: sdk, sdk: sdk, Endpoint: endpoint}, nil
}
