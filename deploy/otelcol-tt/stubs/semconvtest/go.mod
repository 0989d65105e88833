// A stand-in for contrib's pkg/semconvtest, for the otelcol-tt build only
// (builder-config.yaml replaces the module with this directory).
module github.com/open-telemetry/opentelemetry-collector-contrib/pkg/semconvtest

go 1.25
