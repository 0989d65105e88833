package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/usertest"
	"github.com/ttkit/ttkit/queued/api"
)

// cpuHog keeps both cores busy with two shell loops at normal priority
// until the test ends, as a laptop compiling something else would.
func cpuHog(t *testing.T) {
	t.Helper()
	for range 2 {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
}

// askAs sends one request as uid on a new connection, waiting up to a
// minute for the answer, and returns its status, bound header and body.
func (s *shared) askAs(uid uint32, path string) (int, string, string, error) {
	c, err := usertest.DialUnixAs(s.sock, uid, uid)
	if err != nil {
		return 0, "", "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", path); err != nil {
		return 0, "", "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get(api.HeaderBusyBound), string(b), nil
}

// TestStreams_OwnStreamsNeverRefuseOwnPage is the demo's request pattern
// on a busy machine: one user holds more change-feed streams than their
// stream bound while root makes changes all the time (so every stream
// wakes, works and asks again), and loads the page (GET /, /status and
// /jobs at once, as a browser does) every 100 ms, with both cores busy.
// Their streams once took the handler slots and connections their short
// requests needed, which were then answered 503. No short request of
// theirs may be refused; only the streams past the bound are, with a 503
// naming TT_DEVICE_HTTP_WAITS_PER_USER.
func TestStreams_OwnStreamsNeverRefuseOwnPage(t *testing.T) {
	t.Parallel()
	const waits = 3
	s := startShared(t, func(c *Config) {
		c.MaxConns, c.ConnsPerUser, c.Workers, c.WorkersPerUser, c.WaitsPerUser = 32, 8, 4, 1, waits
	})
	cpuHog(t)
	ctx, stop := context.WithTimeout(context.Background(), 6*time.Second)
	defer stop()
	var wg sync.WaitGroup
	// Root changes the queue all the time.
	wg.Go(func() {
		for ctx.Err() == nil {
			if _, err := s.client.Queue(context.Background(), api.QueueRequest{Cmd: "true", Cwd: s.work, DeviceID: "0"}); err != nil {
				t.Errorf("root's submission: %v", err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	// The user's streams: two more than the bound.
	var streamsRefused atomic.Int64
	for range waits + 2 {
		wg.Go(func() {
			gen := s.generation()
			for ctx.Err() == nil {
				code, bound, body, err := s.askAs(colleague, fmt.Sprintf("/changes?since=%d&wait=30", gen))
				switch {
				case err != nil:
					continue // told to answer early and closed: ask again
				case code == http.StatusServiceUnavailable:
					if bound != "TT_DEVICE_HTTP_WAITS_PER_USER" || !strings.Contains(body, "TT_DEVICE_HTTP_WAITS_PER_USER") {
						t.Errorf("a stream refused without naming the stream bound: %s %q", bound, body)
					}
					streamsRefused.Add(1)
					time.Sleep(time.Second) // its Retry-After, as the client honours it
				case code == http.StatusOK:
					var ch changesResponse
					json.Unmarshal([]byte(body), &ch)
					gen = ch.Gen
				default:
					t.Errorf("a stream: %d %s", code, cut(body, 200))
					return
				}
			}
		})
	}
	// The page, every 100 ms.
	var loads, refused atomic.Int64
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for ctx.Err() == nil {
		<-tick.C
		var page sync.WaitGroup
		for _, path := range []string{"/", "/status", "/jobs"} {
			page.Go(func() {
				code, bound, body, err := s.askAs(colleague, path)
				loads.Add(1)
				if err != nil || code != http.StatusOK {
					refused.Add(1)
					t.Errorf("the user's GET %s with their streams open: %d %s %q %v", path, code, bound, cut(body, 200), err)
				}
			})
		}
		page.Wait()
	}
	stop()
	wg.Wait()
	st := s.statusWithin(time.Minute)
	t.Logf("%d short requests, %d refused; %d streams refused at the bound (status: %d); %d answered early, %d connections evicted",
		loads.Load(), refused.Load(), streamsRefused.Load(), st.HTTP.StreamsRefused, st.HTTP.AnsweredEarly, st.HTTP.Evicted)
	if streamsRefused.Load() == 0 {
		t.Errorf("%d streams of one user with a bound of %d: none refused", waits+2, waits)
	}
}
