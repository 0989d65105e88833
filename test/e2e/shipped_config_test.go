package e2e

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/confmap/confmaptest"
)

// runtimeOverheadMiB is what the Go runtime and the binary take beyond the
// heap that GOMEMLIMIT bounds (stacks, code, runtime metadata).
const runtimeOverheadMiB = 48

// TestShippedMemoryLimitsAgree checks that the shipped collector config and
// systemd unit shed load before the kernel kills the collector: the heap
// target (GOMEMLIMIT) leaves the runtime's overhead below MemoryMax, and
// the memory_limiter's limit plus every request the OTLP receivers may hold
// at once fits under the heap target. Without the request limits a burst of
// pushes took the heap to 381 MiB against limit_mib 160 and MemoryMax 256M.
func TestShippedMemoryLimitsAgree(t *testing.T) {
	root := filepath.Join("..", "..", "deploy")
	conf, err := confmaptest.LoadConf(filepath.Join(root, "otelcol-tt", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	num := func(key string) int {
		t.Helper()
		v := conf.Get(key)
		n, ok := v.(int)
		if !ok {
			t.Fatalf("config.yaml: %s is %v (%T); want a number", key, v, v)
		}
		return n
	}
	limit := num("processors::memory_limiter::limit_mib")
	spike := num("processors::memory_limiter::spike_limit_mib")
	grpcMsg := num("receivers::otlp::protocols::grpc::max_recv_msg_size_mib")
	grpcStreams := num("receivers::otlp::protocols::grpc::max_concurrent_streams")
	httpBody := num("receivers::otlp::protocols::http::max_request_body_size") >> 20

	unit := unitSettings(t, filepath.Join(root, "systemd", "otelcol-tt.service"))
	memMax := mib(t, "MemoryMax", strings.TrimSuffix(unit["MemoryMax"], "M")+"MiB")
	goMemLimit := mib(t, "GOMEMLIMIT", unit["Environment=GOMEMLIMIT"])

	inFlight := grpcMsg*grpcStreams + httpBody
	t.Logf("MemoryMax %d MiB, GOMEMLIMIT %d MiB, limit_mib %d (spike %d), OTLP requests in flight %d MiB",
		memMax, goMemLimit, limit, spike, inFlight)
	if goMemLimit+runtimeOverheadMiB > memMax {
		t.Errorf("GOMEMLIMIT %d MiB + %d MiB runtime overhead exceeds MemoryMax %d MiB", goMemLimit, runtimeOverheadMiB, memMax)
	}
	if limit+inFlight > goMemLimit {
		t.Errorf("limit_mib %d + %d MiB of OTLP requests in flight exceeds GOMEMLIMIT %d MiB", limit, inFlight, goMemLimit)
	}
	if spike < grpcMsg || spike < httpBody {
		t.Errorf("spike_limit_mib %d is below one request (gRPC %d MiB, HTTP %d MiB)", spike, grpcMsg, httpBody)
	}
}

// unitSettings reads a systemd unit's Key=value lines; Environment=NAME=v
// lines are keyed "Environment=NAME".
func unitSettings(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if key == "Environment" {
			name, v, _ := strings.Cut(strings.Trim(val, `"`), "=")
			key, val = "Environment="+name, v
		}
		out[key] = val
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// mib parses "<n>MiB".
func mib(t *testing.T, name, v string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSuffix(v, "MiB"))
	if err != nil || !strings.HasSuffix(v, "MiB") {
		t.Fatalf("%s is %q; want <n>MiB", name, v)
	}
	return n
}

// TestShippedTelemetryPort checks that the collector's own telemetry does
// not listen on the collector's default 8888 (Jupyter's default, common on
// ML hosts, where otelcol-tt would exit at start), that an OTELCOL_TT_*
// variable moves it, and that the variable table of docs/otelcol-tt.md lists it.
func TestShippedTelemetryPort(t *testing.T) {
	conf, err := confmaptest.LoadConf(filepath.Join("..", "..", "deploy", "otelcol-tt", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	readers, _ := conf.Get("service::telemetry::metrics::readers").([]any)
	if len(readers) != 1 {
		t.Fatalf("service::telemetry::metrics::readers = %v; want one pull reader", conf.Get("service::telemetry::metrics::readers"))
	}
	prom, _ := readers[0].(map[string]any)["pull"].(map[string]any)["exporter"].(map[string]any)["prometheus"].(map[string]any)
	for key, want := range map[string]string{
		"host": "${env:OTELCOL_TT_TELEMETRY_HOST:-127.0.0.1}",
		"port": "${env:OTELCOL_TT_TELEMETRY_PORT:-9465}",
	} {
		if got := prom[key]; got != want {
			t.Errorf("telemetry prometheus %s = %v; want %s", key, got, want)
		}
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "otelcol-tt.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"OTELCOL_TT_TELEMETRY_HOST", "OTELCOL_TT_TELEMETRY_PORT", "OTELCOL_TT_TELEMETRY_LEVEL"} {
		if !strings.Contains(string(readme), "| `"+name+"`") {
			t.Errorf("the variable table of docs/otelcol-tt.md does not list %s", name)
		}
	}
}
