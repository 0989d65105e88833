package cli

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/api"
)

// TestConnect_SaysOnceWhenFallingBackToTheSystemQueued: with the user's
// own queued down (it has run: its token is in the state directory) and
// the host's system-mode queued answering, the CLI says on stderr, once,
// that it talks to the shared one; a user who never ran their own queued
// is told nothing, since the shared one is theirs to use.
func TestConnect_SaysOnceWhenFallingBackToTheSystemQueued(t *testing.T) {
	for _, tc := range []struct {
		name     string
		hasToken bool
		notes    int
	}{
		{"own queued down", true, 1},
		{"no own queued ever", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			t.Setenv("TT_DEVICE_LOG_DIR", state)
			if tc.hasToken {
				if _, err := api.EnsureToken(state); err != nil {
					t.Fatal(err)
				}
			}
			sys := filepath.Join(t.TempDir(), "system.sock")
			listenUnix(t, sys)
			var stderr bytes.Buffer
			a := newApp(context.Background(), &Globals{}, Streams{Out: io.Discard, Err: &stderr})
			a.systemSocket = sys
			defer a.close()
			for range 2 {
				if _, err := a.connect(); err != nil {
					t.Fatal(err)
				}
			}
			if a.via != viaSystem {
				t.Fatalf("connect chose %d, want the system socket", a.via)
			}
			got := strings.Count(stderr.String(), "the host's shared queued")
			if got != tc.notes || (tc.notes == 1 && !strings.Contains(stderr.String(), "unix://"+sys)) {
				t.Fatalf("stderr %q: want %d notes naming unix://%s", stderr.String(), tc.notes, sys)
			}
		})
	}
}
