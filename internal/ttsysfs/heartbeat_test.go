package ttsysfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ReadPresence tells apart a host without the driver's class directory,
// a card missing from it, a card without tt_heartbeat and one with it,
// and names the file of a heartbeat that is not a number.
func TestReadPresence(t *testing.T) {
	root := t.TempDir()
	if p, err := ReadPresence(root, 0); err != nil || p != (Presence{}) {
		t.Fatalf("no class directory: %+v, %v", p, err)
	}
	entry := filepath.Join(root, "class", "tenstorrent", "tenstorrent!0")
	if err := os.MkdirAll(filepath.Join(root, "class", "tenstorrent"), 0o755); err != nil {
		t.Fatal(err)
	}
	if p, err := ReadPresence(root, 0); err != nil || !p.Class || p.Entry {
		t.Fatalf("no entry: %+v, %v", p, err)
	}
	if err := os.MkdirAll(entry, 0o755); err != nil {
		t.Fatal(err)
	}
	if p, err := ReadPresence(root, 0); err != nil || !p.Entry || p.Heartbeat.OK {
		t.Fatalf("no heartbeat: %+v, %v", p, err)
	}
	hb := filepath.Join(entry, "tt_heartbeat")
	if err := os.WriteFile(hb, []byte("4242\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := ReadPresence(root, 0); err != nil || p.Heartbeat != (Counter{Value: 4242, OK: true}) {
		t.Fatalf("heartbeat 4242: %+v, %v", p, err)
	}
	if err := os.WriteFile(hb, []byte("\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := ReadPresence(root, 0); err != nil || p.Heartbeat.OK {
		t.Fatalf("an empty heartbeat (a device going away) reads absent: %+v, %v", p, err)
	}
	if err := os.WriteFile(hb, []byte("banana\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadPresence(root, 0)
	if err == nil || !strings.Contains(err.Error(), hb) || !strings.Contains(err.Error(), `"banana"`) {
		t.Fatalf("a heartbeat that is no number: %v", err)
	}
	if errors.Is(err, ErrNoCard) {
		t.Fatalf("not ErrNoCard: %v", err)
	}
}
