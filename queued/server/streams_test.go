package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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

// TestConns_BusyConnectionWaitsForRoom: a new connection over the bound
// while every other one works in a handler used to be answered 503 at
// once; on a slow machine that refused what a moment's wait would serve.
// Its request now waits for room (here: one of the others going idle,
// which is then closed for it) and is served.
func TestConns_BusyConnectionWaitsForRoom(t *testing.T) {
	t.Parallel()
	cs := newConns(2, 2, func(uint32) bool { return true })
	open := func() (*connInfo, net.Conn) {
		t.Helper()
		c, peer := net.Pipe()
		t.Cleanup(func() { c.Close(); peer.Close() })
		info := cs.context(context.Background(), c).Value(connKey{}).(*connInfo)
		cs.hook(c, http.StateNew)
		return info, c
	}
	a, ac := open()
	b, _ := open()
	cs.mu.Lock()
	a.serving, b.serving = true, true
	cs.mu.Unlock()
	third, _ := open()
	if third.refused == "" {
		t.Fatal("a third connection with both others busy was not over the bound")
	}
	r := httptest.NewRequest(http.MethodGet, "/status", nil)
	r = r.WithContext(context.WithValue(r.Context(), connKey{}, third))
	entered := make(chan *BusyError, 1)
	go func() { entered <- cs.enter(r) }()
	select {
	case why := <-entered:
		t.Fatalf("answered at once with every other connection busy: %v; want it to wait for room", why)
	case <-time.After(200 * time.Millisecond):
	}
	cs.hook(ac, http.StateIdle) // a's answer is written: it is idle now
	select {
	case why := <-entered:
		if why != nil {
			t.Fatalf("refused once a connection went idle: %v", why)
		}
	case <-time.After(time.Minute):
		t.Fatal("still waiting a minute after room was made")
	}
	if n := cs.count(); n != 2 {
		t.Fatalf("%d connections counted; want 2 (the idle one closed for the waiting one)", n)
	}
}
