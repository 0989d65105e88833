package store

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestStarts_MarksOutliveTheStore: what each card's slot names last is
// what the next Open reads, a cleared slot names nothing, and a slot
// torn by a crash (half the old, half the new) names nothing rather than
// a job that never started.
func TestStarts_MarksOutliveTheStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openLog(t, dir)
	if got := marks(t, s); len(got) != 0 {
		t.Fatalf("a new store has marks: %+v", got)
	}
	for _, m := range []StartMark{{0, "a1", 1}, {0, "a2", 1}, {3, "b1", 2}, {StartSlots - 1, "c1", 1}, {5, "d1", 1}} {
		if err := s.MarkStart(m.Card, m.ID, m.Attempt); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.MarkStart(5, "", 0); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = openLog(t, dir)
	want := []StartMark{{0, "a2", 1}, {3, "b1", 2}, {StartSlots - 1, "c1", 1}}
	if got := marks(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("marks after reopening: %+v, want %+v", got, want)
	}
	s.Close()

	// A power loss in the middle of card 3's slot: its first half is the
	// new job's, the rest the old one's.
	path := filepath.Join(dir, StartsFile)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := encodeStart("b2-a-longer-id", 1)[:20]
	if _, err := f.WriteAt(torn, 3*StartSlotBytes); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s = openLog(t, dir)
	want = []StartMark{{0, "a2", 1}, {StartSlots - 1, "c1", 1}}
	if got := marks(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("marks after a torn slot: %+v, want %+v", got, want)
	}
}

// TestStarts_RefusesWhatHasNoSlot: a card out of the log's range, or an
// id that does not fit a slot, is refused with ErrNoStartSlot (the start
// is then committed in queue.db), naming the value.
func TestStarts_RefusesWhatHasNoSlot(t *testing.T) {
	t.Parallel()
	s := openLog(t, t.TempDir())
	for _, tc := range []struct {
		card int
		id   string
		want string
	}{
		{StartSlots, "j", "card 256"},
		{-1, "j", "card -1"},
		{0, strings.Repeat("x", StartSlotBytes), "job id of 512 bytes"},
	} {
		err := s.MarkStart(tc.card, tc.id, 1)
		if !errors.Is(err, ErrNoStartSlot) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("MarkStart(%d, %d bytes): %v, want ErrNoStartSlot naming %q", tc.card, len(tc.id), err, tc.want)
		}
	}
}

// TestStarts_SymlinkIsNotFollowed: a link planted at the start log's
// path (a root queued writes it) makes OpenStartLog fail; it writes
// nothing through it.
func TestStarts_SymlinkIsNotFollowed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, StartsFile)); err != nil {
		t.Fatal(err)
	}
	if l, err := OpenStartLog(dir); err == nil {
		l.Close()
		t.Fatal("OpenStartLog followed a symlink at the start log")
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Fatalf("the link's target was written: %q", b)
	}
}

func openLog(t *testing.T, dir string) *StartLog {
	t.Helper()
	l, err := OpenStartLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func marks(t *testing.T, l *StartLog) []StartMark {
	t.Helper()
	m, err := l.Marks()
	if err != nil {
		t.Fatal(err)
	}
	return m
}
