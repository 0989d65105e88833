//go:build demo

package cli_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestDemo runs scripts/demo.sh (make demo) to completion and checks that
// it showed every part: streaming, a failing job, a reset, status and the
// collector's tt_process series for the jobs and the process that bypassed
// the queue. It builds otelcol-tt, so it is behind the demo build tag:
//
//	go test -tags demo -run TestDemo ./queued/cli/
func TestDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "scripts/demo.sh")
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	for _, want := range []string{
		"step 3 on card 0", "the answer is 42", "(tt-device-queue exited 3)",
		"imported: helper.py, beside the script", "shell env", "VIRTUAL_ENV=",
		"card 1 recovered by the reset (rung 1/1): health check and gate passed", "interrupted by a reset of card 1",
		"CARD  STATE", "held outside the queue by pid", "$ tt-device-queue web", "/#token=",
		`friendly_name="train_model"`, `friendly_name="eval_model"`, `friendly_name="rogue_benchmark"`,
		"== Done ==",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the demo did not show %q", want)
		}
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", out)
	}
}
