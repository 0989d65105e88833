package legacyimport

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/internal/kmdtest"
)

// The snapshot is consistent or refused: a database (or WAL) that changes
// between the look that found it and the end of its copy, or is replaced
// by another file, refuses the import as in use, and nothing is returned
// to import from. An unchanged one copies whole.
func TestSnapshot_ChangedWhileReadIsInUse(t *testing.T) {
	t.Parallel()
	make1 := func(t *testing.T) (string, *source) {
		dir := t.TempDir()
		db := filepath.Join(dir, DBName)
		kmdtest.MakeLegacyDB(t, map[string]any{"path": db, "rows": []map[string]any{
			{"id": "aaaa0001", "cmd": "echo a", "cwd": "/", "submitted": 1.0, "status": "queued", "mode": "run"},
		}})
		s, err := openSource(db, false)
		if err != nil {
			t.Fatal(err)
		}
		return db, s
	}
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, db string)
		want   string
	}{
		{"unchanged", func(*testing.T, string) {}, ""},
		{"written", func(t *testing.T, db string) {
			f, err := os.OpenFile(db, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(make([]byte, 4096))
			f.Close()
		}, "changed while it was read"},
		{"a WAL appeared", func(t *testing.T, db string) {
			if err := os.WriteFile(db+"-wal", []byte("wal"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "changed while it was read"},
		{"replaced", func(t *testing.T, db string) {
			b, err := os.ReadFile(db)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(db+".new", b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(db+".new", db); err != nil {
				t.Fatal(err)
			}
		}, "replaced while it was read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db, s := make1(t)
			tc.change(t, db)
			cp, _, err := snapshot(s, t.TempDir())
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if a, b := readAll(t, db), readAll(t, cp); a != b {
					t.Errorf("the copy differs from the database")
				}
				return
			}
			if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), tc.want) || cp != "" {
				t.Errorf("snapshot = %q, %v; want ErrInUse, %q", cp, err, tc.want)
			}
		})
	}
}

func readAll(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
