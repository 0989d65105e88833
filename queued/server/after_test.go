package server

import (
	"fmt"
	"strings"
	"testing"
)

// POST /queue's after, after_mode and array are checked, each refusal
// naming the field and the bad value.
func TestQueue_AfterAndArrayAreChecked(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	dep := d.queue("0", "true")
	many := strings.Repeat(`"`+dep.JobID+`",`, 65)
	for _, tc := range []struct{ extra, want string }{
		{`,"after":"` + dep.JobID + `"`, "want a list of job ids"},
		{`,"after":[` + strings.TrimSuffix(many, ",") + `]`, "65 jobs, the limit is 64"},
		{`,"after":["` + dep.JobID + `"],"after_mode":"sometimes"`, "want ok, notok or any"},
		{`,"after_mode":"ok"`, "without after"},
		{`,"after":["0123456789ab"]`, "0123456789ab"},
		{`,"array":"3-1"`, "runs backwards"},
		{`,"array":"0-7%2"`, "cannot change anything"},
	} {
		code, body := d.raw("POST", "/queue", fmt.Sprintf(`{"cmd":"true","cwd":%q%s}`, d.work, tc.extra), nil)
		if code < 400 || code > 404 || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s; want a refusal saying %q", tc.extra, code, body, tc.want)
		}
	}
	code, body := d.raw("POST", "/queue", fmt.Sprintf(`{"cmd":"true","cwd":%q,"after":[%q],"after_mode":"any","array":"0-2"}`, d.work, dep.JobID[:8]), nil)
	if code != 201 || !strings.Contains(body, `"array_id"`) || strings.Count(body, `"job_ids"`) != 1 {
		t.Fatalf("an array after a job: %d %s", code, body)
	}
}
