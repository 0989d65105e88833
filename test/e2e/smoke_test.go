//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/smoke"
	"github.com/ttkit/ttkit/queued/smoke/smoketest"
)

// The smoke test against the real otelcol-tt, running the shipped config
// on the fake host's KMD tree: the job's process must appear in the real
// exporter's output with the friendly name the receiver gives it.
func TestSmokeWithRealOtelcolTT(t *testing.T) {
	otelcol, err := filepath.Abs(*otelcolBin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(otelcol); err != nil {
		t.Fatalf("otelcol-tt binary: %v (run `make e2e`, which builds it)", err)
	}
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", dir+"/", "github.com/ttkit/ttkit/queued/cmd/queued", "github.com/ttkit/ttkit/queued/cmd/queued-exec")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building queued: %v\n%s", err, out)
	}
	h := smoketest.Start(t, filepath.Join(dir, "queued"))
	metrics := startCollector(t, dir, otelcol, "smoke", h.Tree.Dir, t.TempDir(), hostName)

	var progress bytes.Buffer
	r, err := smoke.Run(context.Background(), smoke.Options{
		Card: 0, Queued: h.Client, QueuedAt: "the test's queued", MetricsURL: "http://" + metrics + "/metrics",
		DevDir: h.DevDir, Python: h.Python, ResetTimeout: time.Minute, MetricsWait: 30 * time.Second, Progress: &progress,
	})
	if err != nil {
		t.Fatalf("smoke.Run: %v\n%s", err, h.Log)
	}
	var out bytes.Buffer
	r.WriteText(&out)
	t.Logf("%s%s", progress.String(), out.String())
	if !r.Passed || !strings.Contains(out.String(), `friendly_name="tt_smoke_holder.py", hostname="`+hostName+`"`) {
		t.Fatalf("smoke test with the real otelcol-tt:\n%s\nqueued:\n%s", out.String(), h.Log)
	}
}
