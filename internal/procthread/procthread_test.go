package procthread

import (
	"os"
	"path/filepath"
	"testing"
)

// Other passes over the leader, takes the first thread ok accepts, and
// finds nothing in a process of one thread or one that is gone.
func TestOther(t *testing.T) {
	root := t.TempDir()
	proc := filepath.Join(root, "100")
	for _, tid := range []string{"100", "101", "102", "103"} {
		if err := os.MkdirAll(filepath.Join(proc, "task", tid), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got := Other(proc, nil); got == "" || filepath.Base(got) == "100" {
		t.Errorf("Other(nil) = %q; want a thread other than the leader", got)
	}
	only102 := func(td string) bool { return filepath.Base(td) == "102" }
	if got, want := Other(proc, only102), filepath.Join(proc, "task", "102"); got != want {
		t.Errorf("Other(only 102) = %q; want %q", got, want)
	}
	if got := Other(proc, func(string) bool { return false }); got != "" {
		t.Errorf("Other(none) = %q; want none", got)
	}
	alone := filepath.Join(root, "200")
	if err := os.MkdirAll(filepath.Join(alone, "task", "200"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := Other(alone, nil); got != "" {
		t.Errorf("a process of one thread: %q; want none", got)
	}
	if got := Other(filepath.Join(root, "300"), nil); got != "" {
		t.Errorf("a process that is gone: %q; want none", got)
	}
}
