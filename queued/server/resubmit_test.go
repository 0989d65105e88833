package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/fusetest"
	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/store"
)

// POST /resubmit queues a copy of a job made by the daemon: program,
// directory, environment, timeout and repeat, on its card or another.
func TestResubmit(t *testing.T) {
	t.Parallel()
	t.Run("copies the job", func(t *testing.T) {
		t.Parallel()
		d := start(t, options{})
		q, err := d.client.Queue(d.ctx(), api.QueueRequest{Cmd: "echo $X", Cwd: d.work, DeviceID: "1", Env: map[string]string{"X": "y"}, Timeout: 77, Repeat: 2})
		if err != nil {
			t.Fatal(err)
		}
		d.result(q.JobID)
		m := d.object(http.MethodPost, "/resubmit", `{"job_id":"`+q.JobID[:8]+`","device_id":"0"}`, http.StatusCreated)
		if m["resubmitted_from"] != q.JobID || m["device_id"] != "0" {
			t.Fatalf("answer %v", m)
		}
		d.result(m["job_id"].(string))
		j, err := d.client.Job(d.ctx(), m["job_id"].(string)) // whole, environment included
		if err != nil || j.Cmd != "echo $X" || j.Cwd != d.work || j.Env["X"] != "y" || j.Timeout != 77 || j.Repeat != 2 || *j.ExitCode != 0 {
			t.Errorf("the copy: %+v", j)
		}
	})
	t.Run("refusals", func(t *testing.T) {
		t.Parallel()
		d := start(t, options{api: func(c *Config) { c.MaxTimeout = 60 * time.Second }})
		card := 0
		old := store.Job{ID: "abcdef" + strings.Repeat("1", 26), Seq: 900, Kind: store.KindJob, Device: &card, Cmd: "true", Cwd: d.work,
			Timeout: 3600, Repeat: 1, State: store.StateDone, FinishedAt: time.Now()}
		reset := store.Job{ID: "fedcba" + strings.Repeat("2", 26), Seq: 901, Kind: store.KindReset, Device: &card, Cmd: "reset",
			State: store.StateDone, FinishedAt: time.Now()}
		// A record over the budget (an older store, or one written by
		// hand): its copy would be a submission POST /queue refuses.
		huge := store.Job{ID: "abcdef" + strings.Repeat("5", 26), Seq: 902, Kind: store.KindJob, Device: &card, Cmd: "true", Cwd: d.work,
			Env: map[string]string{"BIG": strings.Repeat("b", api.MaxRecordBytes)}, Timeout: 10, Repeat: 1, State: store.StateDone, FinishedAt: time.Now()}
		if err := d.st.Put(old, reset, huge); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			body string
			code int
			want string
		}{
			{`{"job_id":"` + reset.ID + `"}`, 400, "is a reset, not a job"},
			{`{"job_id":"` + old.ID + `"}`, 400, "above today's maximum 60s"},
			{`{"job_id":"` + huge.ID + `"}`, 400, "the limit of a job's record is 262144"},
			{`{"job_id":"0123456789"}`, 404, ""},
			{`{"job_id":"` + old.ID + `","device_id":"7"}`, 400, ""},
			{`{}`, 400, "job_id"},
		} {
			code, body := d.raw(http.MethodPost, "/resubmit", tc.body, nil)
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Errorf("%s: %d %s, want %d %q", tc.body, code, body, tc.code, tc.want)
			}
		}
	})
	t.Run("shared: the copy is the owner's, and a job without one is refused", func(t *testing.T) {
		t.Parallel()
		d := start(t, options{api: func(c *Config) { c.Mode = api.SystemMode }})
		card, uid := 0, uint32(4242)
		owned := store.Job{ID: "abcdef" + strings.Repeat("3", 26), Seq: 900, Kind: store.KindJob, Device: &card, Cmd: "true", Cwd: d.work,
			Timeout: 60, Repeat: 1, State: store.StateDone, FinishedAt: time.Now(), OwnerUID: &uid, Owner: "alice"}
		orphan := owned
		orphan.ID, orphan.Seq, orphan.OwnerUID, orphan.Owner = "abcdef"+strings.Repeat("4", 26), 901, nil, ""
		if err := d.st.Put(owned, orphan); err != nil {
			t.Fatal(err)
		}
		// Over TCP the caller is the daemon's own user, an admin.
		m := d.object(http.MethodPost, "/resubmit", `{"job_id":"`+owned.ID+`"}`, http.StatusCreated)
		if m["owner"] != "alice" {
			t.Errorf("an admin's resubmit of alice's job is %v's, want alice's", m["owner"])
		}
		code, body := d.raw(http.MethodPost, "/resubmit", `{"job_id":"`+orphan.ID+`"}`, nil)
		if code != http.StatusConflict || !strings.Contains(body, "no recorded owner") {
			t.Errorf("a job without an owner: %d %s", code, body)
		}
	})
}

// A user-mode submission looks at its working directory; one on a mount
// that never answers is refused within seconds instead of holding the
// request forever.
func TestQueue_WorkingDirectoryThatHangsIsRefused(t *testing.T) {
	t.Parallel()
	hang, _ := fusetest.HangingDir(t)
	d := start(t, options{})
	began := time.Now()
	code, body := d.raw(http.MethodPost, "/queue", `{"cmd":"true","cwd":"`+hang+`"}`, nil)
	if code != http.StatusBadRequest || !strings.Contains(body, "did not answer") || time.Since(began) > 10*time.Second {
		t.Errorf("%d %s after %s", code, body, time.Since(began))
	}
}
