package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/scheduler"
	"github.com/ttkit/ttkit/queued/store"
)

func TestAPI_QueueFollowResult(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	gate, release := d.gate()
	r, err := d.client.Queue(d.ctx(), api.QueueRequest{Cmd: "echo hello; " + gate, Cwd: d.work, DeviceID: "1",
		Env: map[string]string{"GREETING": "hi"}, ClientID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.JobID) != 32 || r.DeviceID != "1" || r.State != "queued" || r.Position != 1 {
		t.Fatalf("queue response %+v", r)
	}
	d.waitOutput(r.JobID, "started")
	j, err := d.client.Job(d.ctx(), r.JobID[:8])
	if err != nil || j.State != "running" || j.PID == 0 || j.ExitCode != nil || j.Env["GREETING"] != "hi" || j.ClientID != "test" {
		t.Fatalf("running job %+v, %v", j, err)
	}
	// A result asked for with a short wait comes back unfinished.
	if j, err := d.client.Result(d.ctx(), r.JobID, 10*time.Millisecond); err != nil || j.Done() {
		t.Fatalf("early result %+v, %v", j, err)
	}
	followed := make(chan string)
	go func() {
		var b strings.Builder
		_, err := d.client.Follow(d.ctx(), r.JobID, 0, &b)
		if err != nil {
			b.WriteString("ERROR " + err.Error())
		}
		followed <- b.String()
	}()
	release()
	if out := <-followed; out != "hello\nstarted\nreleased\n" {
		t.Fatalf("followed %q", out)
	}
	j = d.result(r.JobID[:6])
	if *j.ExitCode != 0 || j.Outcome != "success" || j.LogBytes != 23 || j.FinishedAt == nil {
		t.Fatalf("result %+v", j)
	}
	ch, err := d.client.Logs(d.ctx(), r.JobID, api.LogsQuery{Offset: 6, Limit: 7})
	if err != nil || string(ch.Data) != "started" || ch.NextOffset != 13 || ch.Size != 23 || ch.Done || ch.State != "done" {
		t.Fatalf("chunk %+v %q, %v", ch, ch.Data, err)
	}
	ch, err = d.client.Logs(d.ctx(), r.JobID, api.LogsQuery{Offset: 13, Wait: time.Minute})
	if err != nil || string(ch.Data) != "\nreleased\n" || !ch.Done {
		t.Fatalf("last chunk %+v, %v", ch, err)
	}
}

func TestAPI_LongPollWakesOnOutputAndEnd(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	gate, release := d.gate()
	r := d.queue("0", gate)
	d.waitOutput(r.JobID, "started")
	type res struct {
		ch  api.LogChunk
		err error
		dur time.Duration
	}
	got := make(chan res)
	go func() {
		t0 := time.Now()
		ch, err := d.client.Logs(d.ctx(), r.JobID, api.LogsQuery{Offset: 8, Wait: api.MaxWait})
		got <- res{ch, err, time.Since(t0)}
	}()
	poll(t, "the long-poll to wait", func() bool { return d.srv.slots.polling.Load() == 1 })
	release()
	g := <-got
	if g.err != nil || string(g.ch.Data) != "released\n" || g.dur > 30*time.Second {
		t.Fatalf("long-poll %+v %q in %s", g.ch, g.ch.Data, g.dur)
	}
	j, err := d.client.Result(d.ctx(), r.JobID, api.MaxWait)
	if err != nil || !j.Done() {
		t.Fatalf("result %+v, %v", j, err)
	}
}

func TestAPI_BadInput(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	file := filepath.Join(d.work, "file")
	os.WriteFile(file, nil, 0o600)
	done := d.result(d.queue("0", "true").JobID)
	q := func(extra string) string {
		return fmt.Sprintf(`{"cmd":"true","cwd":%q%s}`, d.work, extra)
	}
	long := strings.Repeat("x", api.MaxCmdBytes+1)
	unknown := strings.Repeat("0", 32)
	cases := []struct {
		name, method, path, body string
		code                     int
		field                    string
	}{
		{"empty object", "POST", "/queue", `{}`, 400, "cmd"},
		{"empty cmd", "POST", "/queue", fmt.Sprintf(`{"cmd":"","cwd":%q}`, d.work), 400, "cmd"},
		{"blank cmd", "POST", "/queue", fmt.Sprintf(`{"cmd":"  \n","cwd":%q}`, d.work), 400, "cmd"},
		{"cmd number", "POST", "/queue", fmt.Sprintf(`{"cmd":5,"cwd":%q}`, d.work), 400, "cmd"},
		{"cmd too long", "POST", "/queue", fmt.Sprintf(`{"cmd":%q,"cwd":%q}`, long, d.work), 400, "cmd"},
		{"cmd NUL", "POST", "/queue", fmt.Sprintf(`{"cmd":"a\u0000b","cwd":%q}`, d.work), 400, "cmd"},
		{"relative cwd", "POST", "/queue", `{"cmd":"true","cwd":"work/dir"}`, 400, "cwd"},
		{"missing dir", "POST", "/queue", `{"cmd":"true","cwd":"/nonexistent/dir"}`, 400, "cwd"},
		{"cwd is a file", "POST", "/queue", fmt.Sprintf(`{"cmd":"true","cwd":%q}`, file), 400, "cwd"},
		{"cwd array", "POST", "/queue", `{"cmd":"true","cwd":["/"]}`, 400, "cwd"},
		{"unknown card", "POST", "/queue", q(`,"device_id":"7"`), 400, "device_id"},
		{"card word", "POST", "/queue", q(`,"device_id":"abc"`), 400, "device_id"},
		{"card bool", "POST", "/queue", q(`,"device_id":true`), 400, "device_id"},
		{"card negative", "POST", "/queue", q(`,"device_id":-1`), 400, "device_id"},
		{"card leading zero", "POST", "/queue", q(`,"device_id":"01"`), 400, "device_id"},
		{"card fraction", "POST", "/queue", q(`,"device_id":1.5`), 400, "device_id"},
		{"env digit name", "POST", "/queue", q(`,"env":{"1BAD":"x"}`), 400, "env"},
		{"env dash name", "POST", "/queue", q(`,"env":{"A-B":"x"}`), 400, "env"},
		{"env empty name", "POST", "/queue", q(`,"env":{"":"x"}`), 400, "env"},
		{"env reserved", "POST", "/queue", q(`,"env":{"TT_QUEUE_JOB_ID":"x"}`), 400, "env"},
		{"env list", "POST", "/queue", q(`,"env":["A=1"]`), 400, "env"},
		{"env number value", "POST", "/queue", q(`,"env":{"A":1}`), 400, "env"},
		{"env NUL value", "POST", "/queue", q(`,"env":{"A":"x\u0000"}`), 400, "env"},
		{"timeout negative", "POST", "/queue", q(`,"timeout":-1`), 400, "timeout"},
		{"timeout above max", "POST", "/queue", q(`,"timeout":86401`), 400, "timeout"},
		{"timeout string", "POST", "/queue", q(`,"timeout":"10"`), 400, "timeout"},
		{"timeout fraction", "POST", "/queue", q(`,"timeout":1.5`), 400, "timeout"},
		{"timeout huge", "POST", "/queue", q(`,"timeout":1e30`), 400, "timeout"},
		{"repeat negative", "POST", "/queue", q(`,"repeat":-1`), 400, "repeat"},
		{"repeat above max", "POST", "/queue", q(`,"repeat":10001`), 400, "repeat"},
		{"repeat string", "POST", "/queue", q(`,"repeat":"2"`), 400, "repeat"},
		{"client_id long", "POST", "/queue", q(`,"client_id":"` + strings.Repeat("c", 257) + `"`), 400, "client_id"},
		{"client_id control", "POST", "/queue", q(`,"client_id":"a\nb"`), 400, "client_id"},
		{"unknown field", "POST", "/queue", q(`,"bogus":1`), 400, "bogus"},
		{"empty field name", "POST", "/queue", q(`,"":1`), 400, `"": unknown field`},
		{"repeated cmd", "POST", "/queue", fmt.Sprintf(`{"cmd":"true","cwd":%q,"cmd":"touch x"}`, d.work), 400, "cmd: given more than once"},
		{"repeated env name", "POST", "/queue", q(`,"env":{"A":"1","A":"2"}`), 400, `env: key "A"`},
		{"repeated device_id", "POST", "/queue", q(`,"device_id":"0","device_id":"1"`), 400, "device_id"},
		{"array body", "POST", "/queue", `[]`, 400, "body"},
		{"not JSON", "POST", "/queue", `cmd=true`, 400, "body"},
		{"null body", "POST", "/queue", `null`, 400, "body"},
		{"trailing data", "POST", "/queue", q(``) + ` {}`, 400, "body"},
		{"invalid UTF-8", "POST", "/queue", "{\"cmd\":\"\xff\",\"cwd\":\"/\"}", 400, "body"},
		{"bad id chars", "GET", "/job/xyzxyzxyz", "", 400, "job id"},
		{"short id", "GET", "/job/abc", "", 400, "job id"},
		{"long id", "GET", "/job/" + unknown + "0", "", 400, "job id"},
		{"unknown id", "GET", "/job/" + unknown, "", 404, ""},
		{"unknown logs", "GET", "/logs/" + unknown, "", 404, ""},
		{"negative offset", "GET", "/logs/" + done.ID + "?offset=-1", "", 400, "offset"},
		{"offset past end", "GET", "/logs/" + done.ID + "?offset=5", "", 400, "offset"},
		{"limit too big", "GET", "/logs/" + done.ID + "?limit=99999999", "", 400, "limit"},
		{"wait too long", "GET", "/logs/" + done.ID + "?wait=61", "", 400, "wait"},
		{"wait word", "GET", "/logs/" + done.ID + "?wait=soon", "", 400, "wait"},
		{"result wait negative", "GET", "/result/" + done.ID + "?wait=-1", "", 400, "wait"},
		{"kill number", "POST", "/kill", `{"job_id":5}`, 400, "job_id"},
		{"kill malformed", "POST", "/kill", `{"job_id":"zz"}`, 400, "job_id"},
		{"kill unknown field", "POST", "/kill", `{"job_id":"` + done.ID + `","now":true}`, 400, "now"},
		{"kill repeated id", "POST", "/kill", `{"job_id":"` + unknown + `","job_id":"` + done.ID + `"}`, 400, "job_id"},
		{"reset repeated device", "POST", "/reset", `{"device_id":"0","device_id":"1"}`, 400, "device_id"},
		{"kill unknown", "POST", "/kill", `{"job_id":"` + unknown + `"}`, 404, ""},
		{"kill finished", "POST", "/kill", `{"job_id":"` + done.ID + `"}`, 409, ""},
		{"wrong method", "GET", "/queue", "", 405, ""},
		{"wrong method status", "POST", "/status", `{}`, 405, ""},
		{"no endpoint", "GET", "/nope", "", 404, ""},
	}
	for _, tc := range cases {
		code, body := d.raw(tc.method, tc.path, tc.body, nil)
		var e api.ErrorResponse
		if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" {
			t.Errorf("%s: body %q is not a JSON error", tc.name, body)
			continue
		}
		if code != tc.code || !strings.HasPrefix(e.Error, tc.field) {
			t.Errorf("%s: %d %q, want %d naming %q", tc.name, code, e.Error, tc.code, tc.field)
		}
	}
	if st, _ := d.client.Status(d.ctx()); st.Queued != 0 {
		t.Fatalf("bad input queued %d jobs", st.Queued)
	}
	// An integer card is accepted too.
	if code, body := d.raw("POST", "/queue", q(`,"device_id":1`), nil); code != 201 || !strings.Contains(body, `"device_id":"1"`) {
		t.Fatalf("integer device_id: %d %s", code, body)
	}
	// Ambiguous prefix: 409.
	a, b := store.Job{ID: "abcdef" + strings.Repeat("0", 26), Seq: 1000, State: store.StateDone, FinishedAt: time.Now()}, store.Job{}
	b = a
	b.ID, b.Seq = "abcdef"+strings.Repeat("1", 26), 1001
	if err := d.st.Put(a, b); err != nil {
		t.Fatal(err)
	}
	if code, body := d.raw("GET", "/job/ABCDEF", "", nil); code != 409 || !strings.Contains(body, "ambiguous") {
		t.Fatalf("ambiguous: %d %s", code, body)
	}
	if j, err := d.client.Job(d.ctx(), "ABCDEF1"); err != nil || j.ID != b.ID {
		t.Fatalf("upper-case unique prefix: %+v, %v", j, err)
	}
}

func TestAPI_Kill(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	run := d.queue("0", "echo started; sleep 1000")
	queued := d.queue("0", "true")
	d.waitOutput(run.JobID, "started")
	j, err := d.client.Kill(d.ctx(), queued.JobID[:10])
	if err != nil || !j.Done() || *j.ExitCode != -1 || j.Outcome != "killed" {
		t.Fatalf("kill queued %+v, %v", j, err)
	}
	if j, err = d.client.Kill(d.ctx(), run.JobID); err != nil || j.State != "running" {
		t.Fatalf("kill running %+v, %v", j, err)
	}
	if j = d.result(run.JobID); *j.ExitCode != -2 || j.Outcome != "killed" {
		t.Fatalf("killed %+v", j)
	}
	if _, err := d.client.Kill(d.ctx(), run.JobID); !api.IsStatus(err, http.StatusConflict) {
		t.Fatalf("kill done: %v", err)
	}
}

func TestAPI_TimeoutRepeatAndBoundedLog(t *testing.T) {
	t.Parallel()
	d := start(t, options{sched: func(o *scheduler.Options) { o.MaxLogBytes = 1024 }})
	to, err := d.client.Queue(d.ctx(), api.QueueRequest{Cmd: "sleep 1000", Cwd: d.work, Timeout: 1})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := d.client.Queue(d.ctx(), api.QueueRequest{Cmd: `echo x >> n; [ $(wc -l < n) -lt 2 ]`, Cwd: d.work, DeviceID: "1", Repeat: 4})
	if err != nil {
		t.Fatal(err)
	}
	big := d.queue("1", "yes | head -c 50000")
	if j := d.result(to.JobID); *j.ExitCode != -9 || j.Outcome != "timeout" {
		t.Fatalf("timeout %+v", j)
	}
	if j := d.result(rep.JobID); *j.ExitCode != 1 || j.Iterations != 2 {
		t.Fatalf("repeat %+v", j)
	}
	j := d.result(big.JobID)
	if !j.LogTruncated || j.DroppedLogBytes != 50000-1024 {
		t.Fatalf("bounded log %+v", j)
	}
	var out strings.Builder
	if _, err := d.client.Follow(d.ctx(), big.JobID, 0, &out); err != nil || !strings.Contains(out.String(), "bytes of output cut here") ||
		!strings.HasSuffix(out.String(), "y\ny\n") || j.LogBytes != 50000 {
		t.Fatalf("log tail %q, %v", out.String()[max(0, out.Len()-100):], err)
	}
}

func TestAPI_QueueLimitAndBodyLimit(t *testing.T) {
	t.Parallel()
	d := start(t, options{sched: func(o *scheduler.Options) { o.MaxQueued = 2 }, api: func(c *Config) { c.MaxRequestBytes = 4096 }})
	gate, release := d.gate()
	g := d.queue("0", gate)
	d.waitOutput(g.JobID, "started")
	d.queue("0", "true")
	d.queue("0", "true")
	_, err := d.client.Queue(d.ctx(), api.QueueRequest{Cmd: "true", Cwd: d.work})
	if !api.IsStatus(err, http.StatusTooManyRequests) || !strings.Contains(err.Error(), "TT_DEVICE_MAX_QUEUED_JOBS") {
		t.Fatalf("queue full: %v", err)
	}
	_, err = d.client.Queue(d.ctx(), api.QueueRequest{Cmd: strings.Repeat("x", 5000), Cwd: d.work})
	if !api.IsStatus(err, http.StatusRequestEntityTooLarge) || !strings.Contains(err.Error(), "TT_DEVICE_MAX_REQUEST_BYTES") {
		t.Fatalf("body too large: %v", err)
	}
	release()
}

// TestAPI_SlowBodiesAndLongPollsHoldNoHandler: 20 long-poll followers
// and 64 request bodies that never finish arriving hold no handler slot
// at all (a body is read whole before its request takes one), so a
// status request is answered at once; a body that finishes is then
// handled as usual.
func TestAPI_SlowBodiesAndLongPollsHoldNoHandler(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	addr := strings.TrimPrefix(d.url, "http://")
	gate, release := d.gate()
	g := d.queue("0", gate)
	d.waitOutput(g.JobID, "started")

	// 20 followers wait for output that has not come yet.
	var followers sync.WaitGroup
	for range 20 {
		followers.Add(1)
		go func() {
			defer followers.Done()
			if _, err := d.client.Logs(d.ctx(), g.JobID, api.LogsQuery{Offset: 8, Wait: 20 * time.Second}); err != nil {
				t.Error(err)
			}
		}()
	}
	poll(t, "20 long-polls", func() bool { return d.srv.slots.polling.Load() == 20 })
	if d.srv.slots.busy.Load() != 0 {
		t.Fatalf("long-polls hold %d handlers", d.srv.slots.busy.Load())
	}
	// A submission goes straight through.
	d.result(d.queue("1", "true").JobID)

	// 64 slow bodies, four times the handlers.
	body := fmt.Sprintf(`{"cmd":"true","cwd":%q}`, d.work)
	var conns []net.Conn
	for range 64 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "POST /queue HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			addr, d.token, len(body), body[:5])
	}
	poll(t, "64 connections open", func() bool { return d.statusWithin(2*time.Second).HTTP.Conns >= 64 })
	for range 10 {
		if st := d.statusWithin(time.Second); st.HTTP.Busy > 1 || st.HTTP.Waiting > 0 {
			t.Fatalf("with 64 slow bodies: %d handlers busy, %d requests waiting for one", st.HTTP.Busy, st.HTTP.Waiting)
		}
	}
	// A body that finishes is handled.
	fmt.Fprint(conns[0], body[5:])
	resp, err := http.ReadResponse(bufio.NewReader(conns[0]), nil)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("slow body answered %v, %v", resp, err)
	}
	for _, c := range conns {
		c.Close()
	}
	release()
	followers.Wait()
}

func TestAPI_Security(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	port := d.url[strings.LastIndex(d.url, ":")+1:]
	body := fmt.Sprintf(`{"cmd":"touch %s/pwned","cwd":%q}`, d.work, d.work)
	cases := []struct {
		name string
		hdr  map[string]string
		code int
	}{
		{"no token", map[string]string{"Authorization": ""}, 401},
		{"wrong token", map[string]string{"Authorization": "Bearer " + strings.Repeat("0", 64)}, 401},
		{"basic auth", map[string]string{"Authorization": "Basic dXNlcjpwYXNz"}, 401},
		{"rebinding host", map[string]string{"Host": "attacker.example:" + port}, 403},
		{"private address host", map[string]string{"Host": "192.168.1.5:" + port}, 403},
		{"foreign origin", map[string]string{"Origin": "http://attacker.example"}, 403},
		{"other loopback port", map[string]string{"Origin": "http://127.0.0.1:1"}, 403},
		{"null origin", map[string]string{"Origin": "null"}, 403},
		{"cross-site fetch", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"form post", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415},
		{"text post", map[string]string{"Content-Type": "text/plain"}, 415},
		{"no content type", map[string]string{"Content-Type": ""}, 415},
	}
	for _, tc := range cases {
		code, resp := d.raw("POST", "/queue", body, tc.hdr)
		if code != tc.code || !strings.Contains(resp, `"error"`) {
			t.Errorf("%s: %d %s, want %d", tc.name, code, resp, tc.code)
		}
	}
	if code, _ := d.raw("GET", "/status", "", map[string]string{"Authorization": ""}); code != 401 {
		t.Errorf("status without token: %d", code)
	}
	if st, _ := d.client.Status(d.ctx()); st.Queued != 0 || st.Cards[0].Current != nil {
		t.Fatalf("a refused request queued a job: %+v", st)
	}
	if _, err := os.Stat(filepath.Join(d.work, "pwned")); err == nil {
		t.Fatal("a refused request ran")
	}
	// The same request from a loopback name, same origin, JSON, with the token, works.
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port, "localhost"} {
		hdr := map[string]string{"Host": host, "Origin": "http://" + host, "Sec-Fetch-Site": "same-origin",
			"Content-Type": "application/json; charset=utf-8"}
		if code, resp := d.raw("POST", "/queue", fmt.Sprintf(`{"cmd":"true","cwd":%q}`, d.work), hdr); code != 201 {
			t.Errorf("host %s: %d %s", host, code, resp)
		}
	}
	fi, err := os.Stat(filepath.Join(d.dir, api.TokenFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file %v, %v", fi.Mode(), err)
	}
	if tok, err := api.ReadToken(d.dir); err != nil || tok != d.token {
		t.Fatalf("ReadToken = %q, %v", tok, err)
	}
	// A token file with loose permissions is replaced, not trusted.
	os.Chmod(filepath.Join(d.dir, api.TokenFile), 0o644)
	tok2, err := api.EnsureToken(d.dir)
	if err != nil || tok2 == d.token {
		t.Fatalf("loose token reused: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(d.dir, api.TokenFile)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("new token mode %v", fi.Mode())
	}
}

// TestAPI_Concurrent64 has 64 clients submit at once to both cards; every
// id is unique and each card runs its jobs in submission order.
func TestAPI_Concurrent64(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	gate, release := d.gate()
	g0, g1 := d.queue("0", gate), d.queue("1", gate)
	d.waitOutput(g0.JobID, "started")
	d.waitOutput(g1.JobID, "started")
	const clients, each = 64, 6
	ids := make([][]string, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := api.NewClient(d.url, d.token)
			defer cl.Close()
			card := strconv.Itoa(c % 2)
			for i := range each {
				r, err := cl.Queue(d.ctx(), api.QueueRequest{Cmd: fmt.Sprintf("echo %d-%d >> %s/card%s", c, i, d.work, card),
					Cwd: d.work, DeviceID: card, ClientID: strconv.Itoa(c)})
				if err != nil {
					t.Error(err)
					return
				}
				ids[c] = append(ids[c], r.JobID)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	st, _ := d.client.Status(d.ctx())
	if st.Queued != clients*each {
		t.Fatalf("queued %d", st.Queued)
	}
	// The pending lists are in submission (sequence) order, and each
	// client's jobs appear in the order it submitted them.
	seen := map[string]bool{}
	for _, c := range st.Cards {
		for _, p := range c.Pending {
			if seen[p.ID] {
				t.Fatalf("duplicate id %s", p.ID)
			}
			seen[p.ID] = true
		}
	}
	release()
	for c := range clients {
		for _, id := range ids[c] {
			if j := d.result(id); *j.ExitCode != 0 {
				t.Fatalf("job %+v", j)
			}
		}
	}
	for _, card := range []string{"0", "1"} {
		data, _ := os.ReadFile(filepath.Join(d.work, "card"+card))
		lines := strings.Fields(string(data))
		if len(lines) != clients/2*each {
			t.Fatalf("card %s ran %d jobs", card, len(lines))
		}
		// Order by store sequence must equal run order.
		var recs []store.Job
		for c := range clients {
			if strconv.Itoa(c%2) != card {
				continue
			}
			for _, id := range ids[c] {
				rec, _ := d.st.Job(id)
				recs = append(recs, rec)
			}
		}
		sort.Slice(recs, func(i, j int) bool { return recs[i].Seq < recs[j].Seq })
		for i, rec := range recs {
			if want := strings.TrimPrefix(strings.Fields(rec.Cmd)[1], ""); lines[i] != want {
				t.Fatalf("card %s line %d ran %s, sequence says %s", card, i, lines[i], want)
			}
		}
		last := map[string]int{}
		for _, l := range lines {
			c, i, _ := strings.Cut(l, "-")
			n, _ := strconv.Atoi(i)
			if prev, ok := last[c]; ok && n != prev+1 {
				t.Fatalf("client %s: job %d ran after %d", c, n, prev)
			}
			last[c] = n
		}
	}
}

func TestAPI_PersistenceFailureInjected(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	gate, release := d.gate()
	g := d.queue("0", gate)
	d.waitOutput(g.JobID, "started")
	d.fs.set(fmt.Errorf("write queue.db: %w", os.ErrPermission))
	_, err := d.client.Queue(d.ctx(), api.QueueRequest{Cmd: "true", Cwd: d.work, DeviceID: "1"})
	if !api.IsStatus(err, http.StatusServiceUnavailable) || !strings.Contains(err.Error(), "store cannot be written") {
		t.Fatalf("submit while failing: %v", err)
	}
	st, err := d.client.Status(d.ctx())
	if err != nil || st.Persistence.OK || !strings.Contains(st.Persistence.Error, "permission denied") || st.Persistence.Since == nil ||
		st.Cards[1].Worker != "paused: persistence failing" {
		t.Fatalf("status while failing: %+v, %v", st, err)
	}
	release()
	if j, err := d.client.Result(d.ctx(), g.JobID, api.MaxWait); err != nil || !j.Done() || !j.Held {
		t.Fatalf("held result %+v, %v", j, err)
	}
	d.fs.set(nil)
	poll(t, "recovery", func() bool { st, _ := d.client.Status(d.ctx()); return st.Persistence.OK })
	if j, _ := d.client.Job(d.ctx(), g.JobID); j.Held || *j.ExitCode != 0 {
		t.Fatalf("after recovery %+v", j)
	}
	d.result(d.queue("1", "true").JobID)
}

// TestAPI_DeclaredBodyTooLarge sends only the headers of a request whose
// Content-Length is over the limit: the 413 must come back at once, before
// the daemon waits for a body that may never come, and nothing is queued.
func TestAPI_DeclaredBodyTooLarge(t *testing.T) {
	t.Parallel()
	d := start(t, options{api: func(c *Config) { c.MaxRequestBytes = 4096 }})
	addr := strings.TrimPrefix(d.url, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /queue HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n",
		addr, d.token)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer before the body was sent: %v", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(msg), "100000 bytes declared") {
		t.Fatalf("%d %s", resp.StatusCode, msg)
	}
	st, err := d.client.Status(d.ctx())
	if err != nil {
		t.Fatal(err)
	}
	for _, card := range st.Cards {
		if card.Current != nil || len(card.Pending) != 0 {
			t.Fatalf("card %s has work after a refused request: %+v", card.DeviceID, card)
		}
	}
}

// TestAPI_EstimatesOnTheWire checks that the scheduler's estimates reach
// every answer that carries them: with no history a job is expected to
// take scheduler.DefaultRunEstimate per repeat, and once the command has
// run, its own (short) history takes over.
func TestAPI_EstimatesOnTheWire(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	def := scheduler.DefaultRunEstimate.Seconds()
	gate, release := d.gate()
	g := d.queue("0", gate)
	d.waitOutput(g.JobID, "started")
	q, err := d.client.Queue(d.ctx(), api.QueueRequest{Cmd: "true", Cwd: d.work, Repeat: 2})
	if err != nil {
		t.Fatal(err)
	}
	// The gate has run a little, so the wait is just under one default run.
	if q.Position != 1 || q.EstimatedRunSec != 2*def || q.EstimatedWaitSec <= 0 || q.EstimatedWaitSec > def {
		t.Fatalf("queue response %+v", q)
	}
	if j, err := d.client.Job(d.ctx(), q.JobID); err != nil || j.EstimatedRunSec != 2*def || j.EstimatedWaitSec > q.EstimatedWaitSec {
		t.Fatalf("queued job %+v, %v", j, err)
	}
	st, err := d.client.Status(d.ctx())
	if err != nil {
		t.Fatal(err)
	}
	c0 := st.Cards[0]
	if c0.Current == nil || c0.Current.EstimatedRunSec != def || len(c0.Pending) != 1 || c0.Pending[0].EstimatedRunSec != 2*def {
		t.Fatalf("card 0 %+v", c0)
	}
	release()
	d.result(q.JobID)
	again, err := d.client.Queue(d.ctx(), api.QueueRequest{Cmd: "true", Cwd: d.work, Repeat: 3})
	if err != nil {
		t.Fatal(err)
	}
	// `true` takes milliseconds: its history now rules, not the default.
	if again.EstimatedRunSec <= 0 || again.EstimatedRunSec >= def/2 {
		t.Fatalf("estimate after history %+v", again)
	}
	d.result(again.JobID)
}
