package cli_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/api"
)

// queue --array: one ordinary job per index on --device's card, each
// seeing its index and the array id; list, wait, result and logs -f take
// the array id; a bad range is refused naming it, %K is refused saying
// why, and an array past the queue's bound is refused whole.
func TestQueue_Array(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "TT_DEVICE_MAX_QUEUED_JOBS=6")
	r := d.run("queue", "--device", "1", "--array", "0-3", "--", `echo "i=$TT_QUEUE_ARRAY_INDEX a=$TT_QUEUE_ARRAY_ID"; echo second $TT_QUEUE_ARRAY_INDEX`)
	r.want(t, 0, nil, []string{"queued array", "4 jobs (indices 0-3) on card 1"})
	array := strings.TrimSpace(r.stdout)
	if !jobIDRe.MatchString(array) {
		t.Fatalf("queue --array printed %q, want the array id", r.stdout)
	}
	d.run("wait", "--array", array[:8]).want(t, 0, nil, nil)
	var jobs []api.Job
	decode(t, d.run("--json", "list", "--array", array[:8]), &jobs)
	var idx []int
	for _, j := range jobs {
		if j.ArrayID != array || j.ArrayIndex == nil || j.DeviceID != "1" || j.Outcome != "success" {
			t.Fatalf("an element: array %q index %v card %s %s", j.ArrayID, j.ArrayIndex, j.DeviceID, j.Outcome)
		}
		idx = append(idx, *j.ArrayIndex)
	}
	slices.Sort(idx)
	if !slices.Equal(idx, []int{0, 1, 2, 3}) {
		t.Fatalf("indices %v, want 0-3", idx)
	}
	res := d.run("result", "--array", array)
	res.want(t, 0, []string{"i=0 a=" + array, "i=3 a=" + array}, nil)
	if strings.Index(res.stdout, "i=0") > strings.Index(res.stdout, "i=3") {
		t.Fatalf("result --array: not in index order:\n%s", res.stdout)
	}

	logs := d.run("logs", "-f", "--array", array)
	logs.want(t, 0, nil, nil)
	for _, j := range jobs {
		prefix := fmt.Sprintf("[%s #%d] ", j.ID[:8], *j.ArrayIndex)
		for _, line := range []string{fmt.Sprintf("i=%d a=%s", *j.ArrayIndex, array), fmt.Sprintf("second %d", *j.ArrayIndex)} {
			if !strings.Contains(logs.stdout, prefix+line+"\n") {
				t.Fatalf("logs -f --array lacks %q:\n%s", prefix+line, logs.stdout)
			}
		}
	}

	d.run("queue", "--array", "7-0", "--", "true").want(t, 2, nil, []string{`array "7-0"`, "backwards"})
	d.run("queue", "--array", "0-7%2", "--", "true").want(t, 2, nil, []string{`array "0-7%2"`, "%2 cannot change anything"})
	// Six queued jobs at most: seven elements are refused, none queued.
	g := newGate(t)
	d.run("queue", "--", g.wait()).want(t, 0, nil, nil)
	d.run("queue", "--array", "0-6", "--", "true").want(t, 1, nil, []string{"an array of 7 adds to them all or none"})
	var queued []api.Job
	decode(t, d.run("--json", "list", "--state", "queued"), &queued)
	if len(queued) != 0 {
		t.Fatalf("a refused array left %d jobs queued", len(queued))
	}
	r = d.run("queue", "--array", "0-5", "--", "true")
	r.want(t, 0, nil, nil)
	d.run("kill", "--array", strings.TrimSpace(r.stdout)).want(t, 0, nil, nil)
	decode(t, d.run("--json", "list", "--state", "queued"), &queued)
	if len(queued) != 0 {
		t.Fatalf("kill --array left %d jobs queued", len(queued))
	}
	g.open(t)
}
