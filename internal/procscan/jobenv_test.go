package procscan_test

import (
	"testing"

	"github.com/ttkit/ttkit/internal/procscan"
	"github.com/ttkit/ttkit/queued/runner"
)

// The collector reads the job marker by the name queued writes it under;
// procscan repeats the name rather than link queued into the collector.
func TestJobEnvVarIsQueueds(t *testing.T) {
	if procscan.JobEnvVar != runner.JobEnvVar {
		t.Fatalf("procscan.JobEnvVar %q, queued's runner.JobEnvVar %q", procscan.JobEnvVar, runner.JobEnvVar)
	}
}
