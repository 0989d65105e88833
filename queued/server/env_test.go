package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/api"
)

// TestAPI_EnvFromShell: env_from_shell names the env entries the CLI took
// from the submitter's shell; the job record keeps the list, and the job
// runs with those variables over the service's.
func TestAPI_EnvFromShell(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	body := fmt.Sprintf(`{"cmd":"echo $PATH $MINE","cwd":%q,"env":{"PATH":"/from/shell:/usr/bin:/bin","MINE":"given"},"env_from_shell":["PATH"]}`, d.work)
	code, out := d.raw("POST", "/queue", body, nil)
	if code != 201 {
		t.Fatalf("POST /queue with env_from_shell: %d %s", code, out)
	}
	var qr api.QueueResponse
	if err := json.Unmarshal([]byte(out), &qr); err != nil {
		t.Fatal(err)
	}
	d.result(qr.JobID)
	code, out = d.raw("GET", "/job/"+qr.JobID, "", nil)
	if code != 200 || !strings.Contains(out, `"env_from_shell":["PATH"]`) {
		t.Fatalf("GET /job does not list the shell's variables: %d %s", code, out)
	}
	d.waitOutput(qr.JobID, "/from/shell:/usr/bin:/bin given\n")

	q := func(extra string) string {
		return fmt.Sprintf(`{"cmd":"true","cwd":%q%s}`, d.work, extra)
	}
	big := strings.Repeat("x", api.MaxCmdBytes-10)
	var many strings.Builder
	for i := range api.MaxEnvBytes/len(big) + 1 {
		fmt.Fprintf(&many, `,"V%d":%q`, i, big)
	}
	cases := []struct{ name, body, want string }{
		{"not in env", q(`,"env":{"A":"1"},"env_from_shell":["B"]`), `env_from_shell: "B" is not in env`},
		{"no env", q(`,"env_from_shell":["PATH"]`), `env_from_shell: "PATH" is not in env`},
		{"twice", q(`,"env":{"A":"1"},"env_from_shell":["A","A"]`), "env_from_shell: A is listed twice"},
		{"not a list", q(`,"env":{"A":"1"},"env_from_shell":"A"`), "env_from_shell: want an array of variable names, got a string"},
		{"not strings", q(`,"env":{"A":"1"},"env_from_shell":[1]`), "env_from_shell: want an array of variable names"},
		{"too large in all", q(`,"env":{"V":"1"` + many.String() + `}`), "env: "},
	}
	for _, tc := range cases {
		code, out := d.raw("POST", "/queue", tc.body, nil)
		var e api.ErrorResponse
		json.Unmarshal([]byte(out), &e)
		want := tc.want
		if code != 400 || !strings.HasPrefix(e.Error, want) {
			t.Errorf("%s: %d %q, want 400 %q", tc.name, code, e.Error, want)
		}
		if tc.name == "too large in all" && !strings.Contains(e.Error, fmt.Sprint(api.MaxEnvBytes)) {
			t.Errorf("%s: %q does not name the limit %d", tc.name, e.Error, api.MaxEnvBytes)
		}
	}
}
