package cli_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/ttkit/ttkit/queued/api"
)

// stranger is another local user's server on the port queued used: it
// records every request it gets.
type stranger struct {
	mu       sync.Mutex
	requests []string // method, path, Authorization header and body of each
	srv      *http.Server
}

func listenStranger(t *testing.T, addr string) *stranger {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("taking queued's port %s: %v", addr, err)
	}
	s := &stranger{}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.requests = append(s.requests, r.Method+" "+r.URL.Path+" auth="+r.Header.Get("Authorization")+" body="+string(body))
		s.mu.Unlock()
		// Answers like a queued would, proof included, to tempt the CLI.
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == api.ProofPath {
			w.Write([]byte(`{"addr":"` + addr + `","proof":"00"}`))
			return
		}
		w.Write([]byte(`{"job_id":"0123456789abcdef0123456789abcdef","device_id":"0","position":1}`))
	})}
	go s.srv.Serve(ln)
	t.Cleanup(func() { s.srv.Close() })
	return s
}

// leaked fails the test if the stranger saw the token or a job.
func (s *stranger) leaked(t *testing.T, token, when string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.requests {
		if strings.Contains(r, token) || strings.Contains(r, "echo secret") || !strings.HasPrefix(r, "GET "+api.ProofPath+" ") {
			t.Errorf("%s: the stranger on queued's port got %q", when, r)
		}
	}
}

// TestToken_NeverSentToAStranger: while queued is down, after a clean stop
// and after a crash, another user listening on its TCP port gets neither
// the token nor a job from the CLI: by default the CLI talks over the
// socket in the 0700 state directory, and pointed at the TCP port
// explicitly it sends the token only to a server that proves it holds it.
func TestToken_NeverSentToAStranger(t *testing.T) {
	t.Parallel()
	for _, how := range []struct {
		name string
		sig  syscall.Signal
	}{{"clean stop", syscall.SIGTERM}, {"crash", syscall.SIGKILL}} {
		t.Run(how.name, func(t *testing.T) {
			t.Parallel()
			d := startDaemon(t)
			url, err := api.ReadAddress(d.state)
			if err != nil {
				t.Fatal(err)
			}
			token, err := api.ReadToken(d.state)
			if err != nil {
				t.Fatal(err)
			}
			d.run("status").want(t, 0, []string{"CARD"}, nil)
			d.run("--host", url, "status").want(t, 0, []string{"CARD"}, nil)

			d.cmd.Process.Signal(how.sig)
			<-d.exited
			s := listenStranger(t, strings.TrimPrefix(url, "http://"))

			d.run("run", "--", "echo secret").want(t, 1, nil, []string{"cannot reach queued at unix://", "queued is not running"})
			d.run("--host", url, "run", "--", "echo secret").want(t, 1, nil, []string{"not sending the token to " + url, "did not prove"})
			d.runWith([]string{"TT_DEVICE_URL=" + url}, "", "kill", "abcdef").want(t, 1, nil, []string{"not sending the token"})
			s.leaked(t, token, how.name)
		})
	}
}
