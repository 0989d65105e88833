package telemetry

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ttkit/ttkit/queued/telemetry/otlptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// clearEnv empties every variable Setup decides by (t.Setenv restores
// them); an empty variable counts as unset.
func clearEnv(t *testing.T) {
	for _, name := range []string{EnvEndpoint, EnvMetricsEndpoint, EnvProtocol, EnvMetricsProtocol, EnvMetricsExporter,
		EnvSDKDisabled, "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_METRIC_EXPORT_INTERVAL"} {
		t.Setenv(name, "")
	}
}

func TestSetup_NothingWithoutAnEndpoint(t *testing.T) {
	clearEnv(t)
	before := goleak.IgnoreCurrent()
	p, err := Setup(context.Background(), "test", quiet)
	if err != nil {
		t.Fatal(err)
	}
	if p.Enabled() || p.Endpoint != "" {
		t.Fatalf("enabled %v endpoint %q with no OTEL variables", p.Enabled(), p.Endpoint)
	}
	c, err := p.Meter("x").Int64Counter("x")
	if err != nil {
		t.Fatal(err)
	}
	c.Add(context.Background(), 1)
	// No exporter, no reader: not one goroutine was started.
	goleak.VerifyNone(t, before)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestSetup_Settings(t *testing.T) {
	r := otlptest.Start()
	defer r.Close()
	for _, tc := range []struct {
		name    string
		env     map[string]string
		enabled bool
		err     error
	}{
		{"endpoint", map[string]string{EnvEndpoint: "RECEIVER"}, true, nil},
		{"metrics endpoint", map[string]string{EnvMetricsEndpoint: "RECEIVER/v1/metrics"}, true, nil},
		{"sdk disabled", map[string]string{EnvEndpoint: "RECEIVER", EnvSDKDisabled: "true"}, false, nil},
		{"exporter none", map[string]string{EnvEndpoint: "RECEIVER", EnvMetricsExporter: "none"}, false, nil},
		{"exporter prometheus", map[string]string{EnvEndpoint: "RECEIVER", EnvMetricsExporter: "prometheus"}, false, ErrUnsupported},
		{"grpc", map[string]string{EnvEndpoint: "RECEIVER", EnvProtocol: "grpc"}, false, ErrUnsupported},
		{"metrics protocol decides", map[string]string{EnvEndpoint: "RECEIVER", EnvProtocol: "grpc",
			EnvMetricsProtocol: "http/protobuf"}, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, strings.ReplaceAll(v, "RECEIVER", r.URL))
			}
			p, err := Setup(context.Background(), "test", quiet)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if p.Enabled() != tc.enabled {
				t.Fatalf("enabled = %v", p.Enabled())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := p.Shutdown(ctx); err != nil {
				t.Fatalf("shutdown with nothing recorded: %v", err)
			}
		})
	}
}

// TestSetup_ExportsToAnOTLPReceiver sends a counter to a real OTLP/HTTP
// endpoint on the interval the environment sets, with the resource the
// README documents.
func TestSetup_ExportsToAnOTLPReceiver(t *testing.T) {
	clearEnv(t)
	r := otlptest.Start()
	defer r.Close()
	t.Setenv(EnvEndpoint, r.URL)
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "50")
	p, err := Setup(context.Background(), "1.2.3", quiet)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Enabled() || p.Endpoint != r.URL+"/v1/metrics" {
		t.Fatalf("enabled %v endpoint %q", p.Enabled(), p.Endpoint)
	}
	c, _ := p.Meter("test").Int64Counter("test.things")
	c.Add(context.Background(), 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := r.WaitFor(ctx, func(s otlptest.Snapshot) bool {
		v, ok := s.Sum("test.things", nil)
		return ok && v == 3
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Resource("service.name") != ServiceName || s.Resource("service.version") != "1.2.3" || s.Resource("host.name") == "" {
		t.Fatalf("resource: name %q version %q host %q", s.Resource("service.name"), s.Resource("service.version"), s.Resource("host.name"))
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSetup_ShutdownFlushes proves the last measurements leave at exit
// even when the next periodic export is far away.
func TestSetup_ShutdownFlushes(t *testing.T) {
	clearEnv(t)
	r := otlptest.Start()
	defer r.Close()
	t.Setenv(EnvMetricsEndpoint, r.URL+"/v1/metrics")
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "600000")
	t.Setenv("OTEL_SERVICE_NAME", "queued-test")
	p, err := Setup(context.Background(), "test", quiet)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := p.Meter("test").Int64Counter("test.things")
	c.Add(context.Background(), 5)
	if n := r.Requests(); n != 0 {
		t.Fatalf("%d exports before shutdown", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	s, _ := r.Latest()
	if v, ok := s.Sum("test.things", nil); r.Requests() != 1 || !ok || v != 5 || s.Resource("service.name") != "queued-test" {
		t.Fatalf("after shutdown: %d requests, value %v (%v), service %q", r.Requests(), v, ok, s.Resource("service.name"))
	}
}
