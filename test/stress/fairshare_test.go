//go:build stress

package stress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/usertest"
	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/test/stress/queuedproc"
)

// fairFlood is how long the flooding user keeps at it.
const fairFlood = 15 * time.Second

// TestFairShare: on a system-mode queued, one user floods the socket
// while another works. The flooder holds 300 long-polls and 64 request
// bodies that never finish, submits jobs of the largest records allowed
// from 16 clients as fast as queued answers, and sends records past the
// budget; the colleague submits a small job every 300 ms, waits for its
// end and asks for status. Every request of the colleague's is answered,
// none refused; each of their jobs runs and ends with exit 0, in FIFO
// turn behind the flooder's (no fast lane); the flooder never holds more
// than their share of the queue (429 says so) nor of the connections; the
// records past the budget get 400; queued's memory stays bounded; and
// every job the flooder got accepted runs too.
func TestFairShare(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the fair-share round runs jobs as two users it creates: run as root (make stress does in CI)")
	}
	alice, bob := usertest.New(t, "qflood"), usertest.New(t, "qwork")
	open := usertest.OpenDir(t)
	run := filepath.Join(open, "run") // the socket's directory: root's, 0755
	if err := os.Mkdir(run, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(run, "queued.sock")
	const maxQueued = 200 // a quarter, 50, for each user
	d := startIn(t, filepath.Join(t.TempDir(), "state"), filepath.Join(t.TempDir(), "queued.log"), "",
		"TT_DEVICE_SOCKET="+sock, fmt.Sprintf("TT_DEVICE_MAX_QUEUED_JOBS=%d", maxQueued))
	root := d.Client()
	defer root.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	idle, _ := d.Usage()

	as := func(u usertest.User) *userClient { return newUserClient(sock, u) }
	flooder, colleague := as(alice), as(bob)
	floodCtx, stop := context.WithTimeout(ctx, fairFlood)
	defer stop()
	var flood sync.WaitGroup
	var fs floodStats

	// 300 long-polls and 64 slow bodies, held until the flood ends.
	gen := changesGen(t, d)
	for i := range 364 {
		req := fmt.Sprintf("GET /changes?since=%d&wait=60 HTTP/1.1\r\nHost: localhost\r\n\r\n", gen)
		if i >= 300 {
			req = "POST /queue HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{\"cmd\":"
		}
		flood.Go(func() { hold(floodCtx, sock, alice, req) })
	}
	// 16 clients submitting the largest records, and some past the budget.
	var accepted sync.Map
	for c := range 16 {
		flood.Go(func() {
			for i := 0; floodCtx.Err() == nil; i++ {
				req := bigRecord(fmt.Sprintf("%d-%d", c, i), alice.Home, api.MaxRecordBytes)
				if i%10 == 9 {
					req = bigRecord("over", alice.Home, api.MaxRecordBytes+1)
				}
				var resp api.QueueResponse
				code, msg := flooder.post(floodCtx, "/queue", req, &resp)
				switch {
				case code == http.StatusCreated && i%10 != 9:
					accepted.Store(resp.JobID, true)
					fs.accepted.Add(1)
				case code == http.StatusTooManyRequests && strings.Contains(msg, "TT_DEVICE_MAX_QUEUED_PER_USER"):
					fs.full.Add(1)
					// Wait for one of theirs to end before trying again,
					// as a client that reads 429 would.
					select {
					case <-floodCtx.Done():
					case <-time.After(20 * time.Millisecond):
					}
				case code == http.StatusBadRequest && i%10 == 9 && strings.Contains(msg, "262144"):
					fs.overBudget.Add(1)
				case floodCtx.Err() != nil:
				case code == 0:
					// Its connection closed under it: queued makes room
					// among the flooder's own connections for their new
					// ones (their share of the connections).
					fs.cut.Add(1)
				default:
					fs.other.Add(1)
					t.Errorf("the flooder's submission %d-%d: %d %s", c, i, code, msg)
				}
			}
		})
	}
	// Meanwhile the colleague works, and root watches.
	var colleagueJobs []string
	var latencies []time.Duration
	var worst queuedproc.Usage
	maxQueuedOfFlooder, maxConns := 0, 0
	tick := time.NewTicker(300 * time.Millisecond)
	for i := 0; floodCtx.Err() == nil; i++ {
		<-tick.C
		var resp api.QueueResponse
		if code, msg := colleague.post(ctx, "/queue", api.QueueRequest{Cmd: fmt.Sprintf("echo bob %d", i), Cwd: bob.Home, Timeout: 120}, &resp); code != http.StatusCreated {
			t.Fatalf("the colleague's submission %d during the flood: %d %s", i, code, msg)
		}
		colleagueJobs = append(colleagueJobs, resp.JobID)
		t0 := time.Now()
		var st api.Status
		if code, msg := colleague.get(ctx, "/status", &st); code != http.StatusOK {
			t.Fatalf("the colleague's status during the flood: %d %s", code, msg)
		}
		latencies = append(latencies, time.Since(t0))
		n := 0
		for _, c := range st.Cards {
			for _, p := range c.Pending {
				if p.OwnerUID != nil && *p.OwnerUID == alice.UID {
					n++
				}
			}
		}
		maxQueuedOfFlooder, maxConns = max(maxQueuedOfFlooder, n), max(maxConns, st.HTTP.Conns)
		if u, err := d.Usage(); err == nil && u.RSS > worst.RSS {
			worst = u
		}
	}
	tick.Stop()
	stop()
	flood.Wait()

	// Every job of the colleague's ran, and so did every one the flooder
	// got accepted.
	for i, id := range colleagueJobs {
		var j api.Job
		if code, msg := colleague.waitResult(ctx, id, &j); code != http.StatusOK || j.ExitCode == nil || *j.ExitCode != 0 {
			t.Fatalf("the colleague's job %d: %d %s %+v", i, code, msg, j)
		}
	}
	var ids []string
	accepted.Range(func(k, _ any) bool { ids = append(ids, k.(string)); return true })
	jobs, err := queuedproc.WaitDone(ctx, d, ids, 8)
	if err != nil {
		t.Fatal(err)
	}
	for id, j := range jobs {
		if j.ExitCode == nil || *j.ExitCode != 0 {
			t.Errorf("the flooder's job %s ended %v: %s", id, j.ExitCode, j.Error)
		}
	}
	st, err := root.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if maxQueuedOfFlooder > maxQueued/4 {
		t.Errorf("the flooder had %d jobs queued; their share is %d", maxQueuedOfFlooder, maxQueued/4)
	}
	if fs.full.Load() == 0 || fs.overBudget.Load() == 0 {
		t.Errorf("the flooder never met their share (%d refusals) or the record budget (%d)", fs.full.Load(), fs.overBudget.Load())
	}
	p50, p99 := queuedproc.Percentile(latencies, 50), queuedproc.Percentile(latencies, 99)
	t.Logf("%v of flood: the flooder got %d jobs of %d KiB accepted (%d refused for their share of %d, %d over the record budget, %d cut off making room); "+
		"the colleague's %d jobs all ran, their status p50 %v p99 %v; at most %d jobs of the flooder's queued and %d connections open; "+
		"%d long-polls answered early, %d connections evicted; RSS idle %s, worst %s (anon %s, file %s)",
		fairFlood, fs.accepted.Load(), api.MaxRecordBytes>>10, fs.full.Load(), maxQueued/4, fs.overBudget.Load(), fs.cut.Load(),
		len(colleagueJobs), p50.Round(time.Microsecond), p99.Round(time.Microsecond), maxQueuedOfFlooder, maxConns,
		st.HTTP.AnsweredEarly, st.HTTP.Evicted, queuedproc.MiB(idle.RSS), queuedproc.MiB(worst.RSS), queuedproc.MiB(worst.RSSAnon), queuedproc.MiB(worst.RSSFile))
	if p99 > time.Second {
		t.Errorf("the colleague's status p99 %v during the flood", p99)
	}
	if worst.RSS > 128<<20 {
		t.Errorf("queued's RSS reached %s during the flood", queuedproc.MiB(worst.RSS))
	}
}

type floodStats struct {
	accepted, full, overBudget, cut, other atomic.Int64
}

// bigRecord is a job whose command and environment take size bytes.
func bigRecord(tag, cwd string, size int) api.QueueRequest {
	cmd := "sleep 0.02 # " + tag + " " + strings.Repeat("c", 32<<10)
	rest := size - len(cmd) - 2*(len("A=")+1)
	return api.QueueRequest{Cmd: cmd, Cwd: cwd, Timeout: 60, Env: map[string]string{
		"A": strings.Repeat("a", rest/2), "B": strings.Repeat("b", rest-rest/2)}}
}

// hold opens a connection as u, sends req and waits for an answer, the
// connection's end or ctx's.
func hold(ctx context.Context, sock string, u usertest.User, req string) {
	c, err := usertest.DialUnixAs(sock, u.UID, u.GID)
	if err != nil {
		return
	}
	defer c.Close()
	go func() { <-ctx.Done(); c.Close() }()
	if _, err := io.WriteString(c, req); err == nil {
		http.ReadResponse(bufio.NewReader(c), nil)
	}
}

// changesGen is the daemon's change generation now.
func changesGen(t *testing.T, d *queuedproc.Daemon) uint64 {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, d.URL+"/changes", nil)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ch struct {
		Gen uint64 `json:"gen"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ch); err != nil {
		t.Fatal(err)
	}
	return ch.Gen
}

// userClient speaks HTTP on the socket as one user, as the kernel sees
// them.
type userClient struct{ hc *http.Client }

func newUserClient(sock string, u usertest.User) *userClient {
	return &userClient{hc: &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			return usertest.DialUnixAs(sock, u.UID, u.GID)
		},
	}}}
}

func (c *userClient) do(ctx context.Context, method, path string, body, out any) (int, string) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://localhost"+path, rd)
	if err != nil {
		return 0, err.Error()
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode < 300 && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return 0, err.Error()
		}
	}
	return resp.StatusCode, string(b)
}

func (c *userClient) post(ctx context.Context, path string, body, out any) (int, string) {
	return c.do(ctx, http.MethodPost, path, body, out)
}

func (c *userClient) get(ctx context.Context, path string, out any) (int, string) {
	return c.do(ctx, http.MethodGet, path, nil, out)
}

// waitResult long-polls GET /result until the job is done.
func (c *userClient) waitResult(ctx context.Context, id string, j *api.Job) (int, string) {
	for {
		code, msg := c.get(ctx, "/result/"+id+"?wait=30", j)
		if code != http.StatusOK || j.ExitCode != nil {
			return code, msg
		}
	}
}
