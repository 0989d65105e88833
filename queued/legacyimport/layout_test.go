package legacyimport_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/queued/legacyimport"
)

// TestImport_Layouts: every layout the current Python tool reads is
// imported (user_version 2, and 1, the previous release's, which the
// tool migrates); a newer one (3) and the original pre-v2 layout, which
// the tool refuses too, are refused with ErrLayout, naming why.
func TestImport_Layouts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		spec map[string]any
		want string // "" imports
	}{
		{"user_version 2", map[string]any{"user_version": 2}, ""},
		{"user_version 1 (bb03448)", map[string]any{"user_version": 1}, ""},
		{"user_version 3", map[string]any{"user_version": 3}, "user_version 3, a newer layout"},
		{"pre-v2", map[string]any{"layout": "pre-v2"}, "which the Python tool refuses too"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			spec := map[string]any{"path": filepath.Join(dir, legacyimport.DBName),
				"rows":         []map[string]any{{"id": "aaaa0001", "cmd": "true", "cwd": dir, "submitted": 1.0, "status": "queued", "mode": "run", "client_id": "a"}},
				"device_state": []map[string]any{{"state": "healthy", "reset_epoch": 2, "reset_pending": 0, "boot_id": kmdtest.BootID(t), "updated_at": 1.0}}}
			for k, v := range tc.spec {
				spec[k] = v
			}
			if tc.spec["layout"] == "pre-v2" {
				spec["rows"] = []map[string]any{{"id": "aaaa0001", "cmd": "true", "cwd": dir, "submitted": 1.0}}
			}
			kmdtest.MakeLegacyDB(t, spec)
			rep, done, err := legacyimport.ImportOnStart(dir, opts())
			if tc.want == "" {
				if err != nil || !done || rep.Queued != 1 {
					t.Fatalf("%s: %+v %v %v; want it imported", tc.name, rep, done, err)
				}
				return
			}
			if !errors.Is(err, legacyimport.ErrLayout) || done || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s: %v (imported %v); want ErrLayout saying %q", tc.name, err, done, tc.want)
			}
		})
	}
}
