package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestClient_RetriesBusy: a 503 given at one of queued's HTTP bounds
// (HeaderBusyBound) is sent again, body and all, after a pause, and
// answered when there is room; past BusyRetries the client gives up with
// a *BusyError naming the bound and how often it tried. A 503 of another
// kind (a stop) is not asked again.
func TestClient_RetriesBusy(t *testing.T) {
	t.Parallel()
	var calls, busyFor atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		switch {
		case r.URL.Path == "/status" && n <= busyFor.Load():
			w.Header().Set(HeaderBusyBound, "TT_DEVICE_HTTP_WORKERS_PER_USER")
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":"server busy: raise TT_DEVICE_HTTP_WORKERS_PER_USER"}`))
		case r.URL.Path == "/queue":
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":"stopping"}`))
		default:
			w.Write([]byte(`{"cards":[]}`))
		}
	}))
	defer srv.Close()
	c := NewClient(srv.URL, "t")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	busyFor.Store(2)
	if _, err := c.Status(ctx); err != nil || calls.Load() != 3 {
		t.Fatalf("busy twice, then room: %v after %d calls; want an answer on the third", err, calls.Load())
	}
	calls.Store(0)
	busyFor.Store(100)
	_, err := c.Status(ctx)
	var be *BusyError
	if !errors.As(err, &be) || be.Bound != "TT_DEVICE_HTTP_WORKERS_PER_USER" || be.Tries != BusyRetries+1 || calls.Load() != BusyRetries+1 {
		t.Fatalf("always busy: %v after %d calls; want a BusyError after %d tries", err, calls.Load(), BusyRetries+1)
	}
	if !IsStatus(err, http.StatusServiceUnavailable) {
		t.Fatalf("a BusyError is not the daemon's 503 to errors.As: %v", err)
	}
	calls.Store(0)
	_, err = c.Queue(ctx, QueueRequest{Cmd: "true"})
	if !IsStatus(err, http.StatusServiceUnavailable) || errors.As(err, &be) || calls.Load() != 1 {
		t.Fatalf("a stop's 503: %v after %d calls; want it once, not as busy", err, calls.Load())
	}
}
