package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ttkit/ttkit/internal/usertest"
	"github.com/ttkit/ttkit/test/stress/queuedproc"
)

const (
	flooder   = 4242 // the user who floods the socket (need not exist)
	colleague = 4243 // another user, asking for status
)

// floodRound starts a system-mode queued, measures another user's GET
// /status on its socket, then has one user open c.polls long-polls and
// c.slowBodies request bodies that never finish and measures again for
// c.flood.
func floodRound(c config, rep *report) error {
	name := fmt.Sprintf("another user's status p99, one user holding %d long-polls and %d slow bodies, <= 50 ms", c.polls, c.slowBodies)
	if os.Geteuid() != 0 {
		rep.skipped(name, "needs root (the flood connects as another uid)")
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := filepath.Join(c.work, "flood")
	run := filepath.Join(dir, "run") // the socket's directory: root's, 0755
	if err := os.MkdirAll(run, 0o755); err != nil {
		return err
	}
	sock := filepath.Join(run, "queued.sock")
	d, err := queuedproc.Start(queuedproc.Options{Bin: c.bin, StateDir: filepath.Join(dir, "state"), LogPath: filepath.Join(dir, "queued.log"),
		Env: []string{"TT_DEVICE_SOCKET=" + sock}})
	if err != nil {
		return err
	}
	defer d.Stop(30 * time.Second)
	quiet, quietFailed, err := statusLatencies(ctx, sock, colleague, 2*time.Second)
	if err != nil {
		return err
	}
	gen, err := generation(ctx, d)
	if err != nil {
		return err
	}

	floodCtx, stop := context.WithCancel(ctx)
	var flood sync.WaitGroup
	var mu sync.Mutex
	opened, answered := 0, 0
	hold := func(req string) {
		defer flood.Done()
		conn, err := usertest.DialUnixAs(sock, flooder, flooder)
		if err != nil {
			return
		}
		defer conn.Close()
		mu.Lock()
		opened++
		mu.Unlock()
		go func() { <-floodCtx.Done(); conn.Close() }()
		if _, err := io.WriteString(conn, req); err != nil {
			return
		}
		// Held until the daemon answers or closes it, or the flood ends.
		if _, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
			mu.Lock()
			answered++
			mu.Unlock()
		}
	}
	poll := fmt.Sprintf("GET /changes?since=%d&wait=60 HTTP/1.1\r\nHost: localhost\r\n\r\n", gen)
	slow := "POST /queue HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{\"cmd\":"
	for i := range c.polls + c.slowBodies {
		req := poll
		if i >= c.polls {
			req = slow
		}
		flood.Add(1)
		go hold(req)
	}
	// The flood in place (every connection made), then measured.
	for {
		mu.Lock()
		n := opened
		mu.Unlock()
		if n >= (c.polls+c.slowBodies)*9/10 || ctx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond) // waiting for the flood's goroutines to connect
	}
	steal := queuedproc.StartSteal()
	loaded, failed, err := statusLatencies(ctx, sock, colleague, c.flood)
	stolen := steal.Stop()
	st, _ := d.Client().Status(ctx)
	stop()
	flood.Wait()
	if err != nil {
		return err
	}
	p99 := queuedproc.Percentile(loaded, 99)
	fmt.Printf("\nsystem mode, another user's GET /status on the socket (a connection each, as the CLI): quiet p50 %v p99 %v (%d, %d refused)\n",
		ms(queuedproc.Percentile(quiet, 50)), ms(queuedproc.Percentile(quiet, 99)), len(quiet), quietFailed)
	fmt.Printf("  while uid %d holds %d long-polls and %d slow bodies: p50 %v p99 %v (%d requests in %v, %d refused, steal %.0f%%)\n",
		flooder, c.polls, c.slowBodies, ms(queuedproc.Percentile(loaded, 50)), ms(p99), len(loaded), c.flood, failed, 100*stolen)
	fmt.Printf("  the flood made %d connections; queued answered %d of them (early, or refused) and kept %d open (bound %d per user, %d long-polls per user); evicted %d, refused %d\n",
		opened, answered, st.HTTP.Conns, st.HTTP.ConnsPerUser, st.HTTP.WaitsPerUser, st.HTTP.Evicted, st.HTTP.Refused)
	rep.target(name, p99 <= 50*time.Millisecond && failed == 0, ms(p99))
	return nil
}

// statusLatencies asks for GET /status as uid on sock, one request on a
// new connection after another, for about d, and returns how long each
// took, connection included (a refused one as long as its refusal took),
// and how many were refused or cut off.
func statusLatencies(ctx context.Context, sock string, uid uint32, d time.Duration) ([]time.Duration, int, error) {
	var out []time.Duration
	failed := 0
	end := time.Now().Add(d)
	for time.Now().Before(end) || len(out) < 20 {
		t0 := time.Now()
		conn, err := usertest.DialUnixAs(sock, uid, uid)
		if err != nil {
			return out, failed, err
		}
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		io.WriteString(conn, "GET /status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("GET /status as uid %d: %s", uid, resp.Status)
			}
		}
		conn.Close()
		if err != nil {
			failed++
		}
		out = append(out, time.Since(t0))
		if ctx.Err() != nil {
			return out, failed, ctx.Err()
		}
	}
	return out, failed, nil
}

// generation is the daemon's change generation now (GET /changes).
func generation(ctx context.Context, d *queuedproc.Daemon) (uint64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.URL+"/changes", nil)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var ch struct {
		Gen uint64 `json:"gen"`
	}
	return ch.Gen, json.NewDecoder(resp.Body).Decode(&ch)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
