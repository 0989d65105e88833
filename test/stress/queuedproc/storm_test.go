package queuedproc

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

type connKey struct{}

// TestStorm_MarksEachClientsFirstSubmission: against a server that names
// each answer by its connection and its place on it, Storm marks as First
// exactly the submission that opened each client's connection, and
// FirstAndLater splits on that mark.
func TestStorm_MarksEachClientsFirstSubmission(t *testing.T) {
	var conns atomic.Int64
	var mu sync.Mutex
	seen := map[int64]int{} // requests answered on each connection
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/queue" {
			http.NotFound(w, r)
			return
		}
		id := r.Context().Value(connKey{}).(int64)
		mu.Lock()
		n := seen[id]
		seen[id]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(api.QueueResponse{JobID: fmt.Sprintf("%d/%d", id, n)})
	}))
	srv.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, conns.Add(1))
	}
	srv.Start()
	defer srv.Close()

	const clients, n = 4, 40
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	subs, err := Storm(ctx, &Daemon{URL: srv.URL}, clients, n, func(int) api.QueueRequest { return api.QueueRequest{Cmd: "true"} })
	if err != nil {
		t.Fatal(err)
	}
	if len(subs) != n {
		t.Fatalf("%d submissions acknowledged, want %d", len(subs), n)
	}
	if got := conns.Load(); got != clients {
		t.Fatalf("the server saw %d connections, want one a client (%d)", got, clients)
	}
	firsts := 0
	for _, s := range subs {
		opened := strings.HasSuffix(s.JobID, "/0")
		if s.First != opened {
			t.Errorf("submission %s (its connection's request %s) marked First=%v", s.JobID, s.JobID[strings.Index(s.JobID, "/")+1:], s.First)
		}
		if s.First {
			firsts++
		}
	}
	if firsts != clients {
		t.Errorf("%d submissions marked First, want %d", firsts, clients)
	}
	first, later := FirstAndLater(subs)
	if len(first) != clients || len(later) != n-clients {
		t.Errorf("FirstAndLater split %d/%d, want %d/%d", len(first), len(later), clients, n-clients)
	}
}
