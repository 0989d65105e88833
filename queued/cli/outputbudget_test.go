package cli_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

// TestOutputBudget runs a real daemon with a 64 KiB output budget: after
// three jobs of 30 KiB each, the oldest one's output is deleted, and job,
// logs, result and status say so plainly; result still exits with the
// job's own status.
func TestOutputBudget(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "TT_DEVICE_MAX_LOG_BYTES=40960", "TT_DEVICE_MAX_OUTPUT_BYTES=65536")
	var ids []string
	for i := range 3 {
		cmd := fmt.Sprintf("head -c 30720 /dev/zero | tr '\\0' %c; exit %d", 'a'+i, 3*i)
		id := strings.TrimSpace(d.run("queue", "--device", "0", "--", cmd).stdout)
		d.run("result", id).want(t, 3*i, nil, nil)
		ids = append(ids, id)
	}
	var st api.Status
	deadline := time.Now().Add(20 * time.Second)
	for st.Output.Deleted < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no output deleted within 20 s: %+v", st.Output)
		}
		r := d.run("--json", "status")
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatal(err, r)
		}
	}
	if st.Output.Deleted != 1 || st.Output.Bytes != 2*30720 || st.Output.MaxBytes != 65536 {
		t.Fatalf("status output %+v; want 1 deleted, 61440 of 65536 bytes", st.Output)
	}
	first, last := ids[0], ids[2]
	if j := d.job(first); j.OutputDeletedAt == nil || j.LogBytes != 30720 || *j.ExitCode != 0 {
		t.Fatalf("record of the job whose output was deleted: %+v", j)
	}
	d.run("job", first).want(t, 0, []string{"30720 bytes, deleted", "TT_DEVICE_MAX_OUTPUT_BYTES"}, nil)
	d.run("logs", first).want(t, 1, nil, []string{"output of job " + first, "was deleted", "TT_DEVICE_MAX_OUTPUT_BYTES"})
	r := d.run("result", first)
	r.want(t, 0, nil, []string{"output was deleted", "TT_DEVICE_MAX_OUTPUT_BYTES"})
	if r.stdout != "" {
		t.Fatalf("result printed output that was deleted: %v", r)
	}
	var rj struct {
		Job    api.Job `json:"job"`
		Output string  `json:"output"`
	}
	r = d.run("--json", "result", first)
	r.want(t, 0, nil, nil)
	if err := json.Unmarshal([]byte(r.stdout), &rj); err != nil || rj.Job.OutputDeletedAt == nil || rj.Output != "" {
		t.Fatalf("result --json: %v %v", err, r)
	}
	// The newest job's output is all there; its status is its own.
	r = d.run("result", last)
	r.want(t, 6, []string{strings.Repeat("c", 30720)}, nil)
	d.run("status").want(t, 0, []string{"output: 60.0 KiB of 64.0 KiB kept (TT_DEVICE_MAX_OUTPUT_BYTES); 1 finished job's output deleted"}, nil)
}
