package doctor

import (
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/api"
)

// Without a delegated cgroup, doctor warns and says what escapes; with
// neither a cgroup nor an audit session per job, it names the escaper
// that then outlives its job.
func TestCheckJobTracking(t *testing.T) {
	cases := []struct {
		tr         *api.JobTracking
		want       Status
		mustSay    []string
		mustNotSay string
	}{
		{&api.JobTracking{Cgroup: true, AuditSession: true}, OK, []string{"cgroup of its own", "systemd-run --user"}, ""},
		{&api.JobTracking{AuditSession: true, Detail: "no cgroup per job: not delegated"}, Warn,
			[]string{"no delegated cgroup", "not delegated", "systemd-run --user", "cron", "ssh", "D-Bus"}, "outlives"},
		{&api.JobTracking{Detail: "no audit session per job: loginuid set"}, Warn, []string{"setsid -f", "outlives", "loginuid set"}, ""},
	}
	for _, tc := range cases {
		c := checkJobTracking(&api.Status{JobTracking: tc.tr})
		if c.Status != tc.want || (tc.want == Warn) != strings.Contains(c.Fix, "Delegate=yes") {
			t.Errorf("%+v: %+v", tc.tr, c)
		}
		for _, s := range tc.mustSay {
			if !strings.Contains(c.Detail, s) {
				t.Errorf("%+v: detail %q lacks %q", tc.tr, c.Detail, s)
			}
		}
		if tc.mustNotSay != "" && strings.Contains(c.Detail, tc.mustNotSay) {
			t.Errorf("%+v: detail %q says %q", tc.tr, c.Detail, tc.mustNotSay)
		}
	}
	if c := checkJobTracking(nil); c.Status != Skip {
		t.Errorf("no queued: %+v", c)
	}
}
