package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestEnsureToken_ReusesOnlyAPrivateToken(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadToken(dir); !errors.Is(err, ErrNoToken) {
		t.Fatalf("ReadToken before start = %v", err)
	}
	tok, err := EnsureToken(dir)
	if err != nil || len(tok) != 64 {
		t.Fatalf("EnsureToken = %q, %v", tok, err)
	}
	again, err := EnsureToken(dir)
	if err != nil || again != tok {
		t.Fatalf("token not reused: %q, %v", again, err)
	}
	if got, err := ReadToken(dir); err != nil || got != tok {
		t.Fatalf("ReadToken = %q, %v", got, err)
	}
	path := filepath.Join(dir, TokenFile)
	os.Chmod(path, 0o640)
	fresh, err := EnsureToken(dir)
	if err != nil || fresh == tok {
		t.Fatalf("group-readable token reused: %v", err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("token mode %v", fi.Mode())
	}
	os.WriteFile(path, []byte("short\n"), 0o600)
	if _, err := ReadToken(dir); err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Fatalf("malformed token read: %v", err)
	}
	if err := WriteAddress(dir, "http://127.0.0.1:1234"); err != nil {
		t.Fatal(err)
	}
	if url, err := ReadAddress(dir); err != nil || url != "http://127.0.0.1:1234" {
		t.Fatalf("ReadAddress = %q, %v", url, err)
	}
}

func TestClient_ErrorsCarryStatusAndMessage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"wrong token"}`))
			return
		}
		if r.URL.Path == "/queue" && r.Header.Get("Content-Type") == "application/json" {
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error":"queue full"}`))
			return
		}
		w.WriteHeader(http.StatusBadGateway)
		w.Write([]byte("not json"))
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := NewClient(srv.URL+"/", "tok")
	defer c.Close()
	_, err := c.Queue(ctx, QueueRequest{Cmd: "true", Cwd: "/"})
	var e *Error
	if !errors.As(err, &e) || e.StatusCode != 429 || e.Message != "queue full" || !IsStatus(err, 429) {
		t.Fatalf("Queue error = %v", err)
	}
	if _, err := c.Status(ctx); !IsStatus(err, 502) || !strings.Contains(err.Error(), "not json") {
		t.Fatalf("Status error = %v", err)
	}
	bad := NewClient(srv.URL, "nope")
	defer bad.Close()
	if _, err := bad.Job(ctx, "abcdef"); !IsStatus(err, 401) {
		t.Fatalf("Job error = %v", err)
	}
}
