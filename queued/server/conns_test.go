package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

// stalledConn dials the daemon with a small receive buffer, sends raw
// (pipelined) requests and never reads the answers.
func (d *daemon) stalledConn(requests ...string) net.Conn {
	d.t.Helper()
	dialer := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		rc.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return err
	}}
	c, err := dialer.Dial("tcp", strings.TrimPrefix(d.url, "http://"))
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { c.Close() })
	for _, r := range requests {
		if _, err := c.Write([]byte(r)); err != nil {
			d.t.Fatal(err)
		}
	}
	return c
}

// getRequest is a raw authorized GET.
func (d *daemon) getRequest(path string) string {
	return fmt.Sprintf("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", path, d.token)
}

// statusWithin asks for /status and fails the test unless the answer
// comes within limit.
func (d *daemon) statusWithin(limit time.Duration) api.Status {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	st, err := d.client.Status(ctx)
	if err != nil {
		d.t.Fatalf("a client was not served within %v: %v", limit, err)
	}
	return st
}

// TestStalledReaderHoldsNoHandler: a client that asks for large answers
// and stops reading them holds no handler slot (the only one, here), so
// other clients are served at once, and the write deadline closes its
// connection.
func TestStalledReaderHoldsNoHandler(t *testing.T) {
	t.Parallel()
	d := start(t, options{api: func(c *Config) { c.Workers = 1; c.WriteTimeout = time.Second }})
	id := d.queue("0", "head -c 1048576 /dev/zero").JobID
	d.result(id)
	// 16 MiB of answers: more than the socket buffers of both ends hold,
	// so the server's writes block.
	var reqs []string
	for range 16 {
		reqs = append(reqs, d.getRequest(fmt.Sprintf("/logs/%s?limit=%d", id, api.MaxLogChunk)))
	}
	base := d.statusWithin(5 * time.Second).HTTP.Conns
	stalled := d.stalledConn(reqs...)
	poll(t, "the stalled reader's connection", func() bool { return d.statusWithin(5*time.Second).HTTP.Conns > base })
	// Whether or not its writes are blocked yet, every status request in
	// the next while must be answered promptly.
	for range 20 {
		if st := d.statusWithin(2 * time.Second); st.HTTP.Busy > 1 {
			t.Fatalf("%d handlers busy with one worker", st.HTTP.Busy)
		}
	}
	// The write deadline ends the stalled answer and its connection.
	poll(t, "the write deadline to close the stalled connection", func() bool {
		return d.statusWithin(5*time.Second).HTTP.Conns <= base
	})
	stalled.SetReadDeadline(time.Now().Add(10 * time.Second))
	var buf [64 << 10]byte
	for {
		if _, err := stalled.Read(buf[:]); err != nil {
			if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
				t.Fatalf("the stalled connection is still open: %v", err)
			}
			break // EOF or reset: the server closed it
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestSlowlorisIsBounded: connections that never finish their request
// headers cannot pile up past MaxConns: at the bound, the one that has
// waited longest outside a handler is closed, so a client arriving later
// is still served at once and the open connections stay within the bound.
func TestSlowlorisIsBounded(t *testing.T) {
	t.Parallel()
	const maxConns, slow = 8, 40
	d := start(t, options{api: func(c *Config) { c.MaxConns = maxConns }})
	conns := make([]net.Conn, slow)
	for i := range conns {
		// A request line and part of the headers, never the blank line.
		conns[i] = d.stalledConn("GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
	}
	for range 5 {
		st := d.statusWithin(2 * time.Second)
		if st.HTTP.Conns > maxConns || st.HTTP.MaxConns != maxConns {
			t.Fatalf("open connections %d, bound %d; want at most %d", st.HTTP.Conns, st.HTTP.MaxConns, maxConns)
		}
	}
	// Every slow connection but the few that still fit was closed by the
	// server; the rest stay until the header timeout.
	var closed sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for _, c := range conns {
		closed.Go(func() {
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			var b [512]byte
			if _, err := c.Read(b[:]); err != nil && !isTimeout(err) {
				mu.Lock()
				n++
				mu.Unlock()
			}
		})
	}
	closed.Wait()
	if n < slow-maxConns {
		t.Fatalf("%d of %d slow connections were closed; want at least %d", n, slow, slow-maxConns)
	}
	if st := d.statusWithin(2 * time.Second); st.HTTP.Evicted < slow-maxConns {
		t.Fatalf("status counts %d evicted connections; want at least %d", st.HTTP.Evicted, slow-maxConns)
	}
}

// TestLongPollOutlastsWriteTimeout: the write deadline starts with the
// answer, so a long-poll that waits longer than WriteTimeout still
// answers, on /logs and on /result.
func TestLongPollOutlastsWriteTimeout(t *testing.T) {
	t.Parallel()
	d := start(t, options{api: func(c *Config) { c.WriteTimeout = time.Second }})
	cmd, release := d.gate()
	defer release()
	id := d.queue("0", cmd).JobID
	d.waitOutput(id, "started")
	ch, err := d.client.Logs(d.ctx(), id, api.LogsQuery{Offset: int64(len("started\n")), Wait: 2 * time.Second})
	if err != nil || len(ch.Data) != 0 || ch.Done {
		t.Fatalf("a 2s long-poll for output with a 1s write timeout: %+v, %v", ch, err)
	}
	j, err := d.client.Result(d.ctx(), id, 2*time.Second)
	if err != nil || j.Done() {
		t.Fatalf("a 2s long-poll for the result with a 1s write timeout: %+v, %v", j, err)
	}
	release()
	if j := d.result(id); *j.ExitCode != 0 {
		t.Fatalf("job: %+v", j)
	}
}

// TestConns_OldestLongPollAnsweredEarly: when every open connection is
// inside a handler and the oldest of them are long-polls (here two, at a
// bound of two), a new connection is not refused: the oldest long-poll is
// answered at once, with what there is now (the job's record, not done),
// its connection closed, and the new one is served.
func TestConns_OldestLongPollAnsweredEarly(t *testing.T) {
	t.Parallel()
	d := start(t, options{api: func(c *Config) { c.MaxConns = 2 }})
	cmd, release := d.gate()
	defer release()
	id := d.queue("0", cmd).JobID
	d.waitOutput(id, "started")
	// The test client's kept-alive connection would be a third: close it,
	// and start the polls one at a time, so the bound never evicts a poll
	// that is still sending its request.
	d.client.Close()
	type answer struct {
		at   time.Time
		done bool
		err  error
	}
	answered := make(chan answer, 2)
	var polls sync.WaitGroup
	for i := range 2 {
		c := api.NewClient(d.url, d.token)
		defer c.Close()
		polls.Go(func() {
			j, err := c.Result(d.ctx(), id, 30*time.Second)
			answered <- answer{time.Now(), j.Done(), err}
		})
		poll(t, "a long-poll", func() bool { return d.srv.slots.polling.Load() == int64(i+1) })
	}
	c := api.NewClient(d.url, d.token)
	defer c.Close()
	t0 := time.Now()
	st, err := c.Status(d.ctx())
	if err != nil {
		t.Fatalf("a third connection with two long-polls open: %v", err)
	}
	select {
	case a := <-answered:
		if a.err != nil || a.done || a.at.Sub(t0) > 5*time.Second {
			t.Fatalf("the oldest long-poll answered %v after the new connection: done %v, %v; want the record, not done", a.at.Sub(t0), a.done, a.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no long-poll was answered early")
	}
	if st.HTTP.AnsweredEarly < 1 {
		t.Errorf("status counts %d long-polls answered early", st.HTTP.AnsweredEarly)
	}
	release()
	polls.Wait()
}
