package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/cli"
)

// TestQueuePython runs scripts through a stand-in interpreter placed where
// the real one is looked for (~/tenstorrent/.venv/bin/python3), so the test
// needs no Python and proves the venv is preferred. The stand-in prints its
// arguments and the script it was given.
func TestQueuePython(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	venv := filepath.Join(d.home, "tenstorrent", ".venv", "bin")
	if err := os.MkdirAll(venv, 0o755); err != nil {
		t.Fatal(err)
	}
	interp := filepath.Join(venv, "python3")
	stub := "#!/bin/sh\necho \"interpreter $0\"\necho \"args: $*\"\ncat \"$1\"\nexit \"${EXIT:-0}\"\n"
	if err := os.WriteFile(interp, []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	scripts := filepath.Join(d.state, cli.ScriptsDir)

	t.Run("stdin, waited for", func(t *testing.T) {
		r := d.runWith(nil, "print('hi from stdin')\n", "queue-python", "--device", "1", "--wait", "-e", "EXIT=5", "-", "first arg", "2")
		r.want(t, 5, []string{"interpreter " + interp, "print('hi from stdin')"}, []string{"queued on card 1", "exit code 5"})
		if !strings.Contains(r.stdout, "args: - first arg 2") {
			t.Fatalf("the arguments are not passed on after -: %v", r)
		}
	})
	t.Run("stdin, queued; the copy is private", func(t *testing.T) {
		r := d.runWith(nil, "print(1)\n", "queue-python", "-")
		r.want(t, 0, nil, []string{"queued on card 0"})
		id := strings.TrimSpace(r.stdout)
		d.run("result", id).want(t, 0, []string{"print(1)"}, nil)
		entries, _ := os.ReadDir(scripts)
		if len(entries) == 0 {
			t.Fatalf("no copy of the stdin script in %s", scripts)
		}
		for _, e := range entries {
			fi, _ := e.Info()
			if fi.Mode().Perm() != 0o600 {
				t.Fatalf("%s has mode %v, want 0600", e.Name(), fi.Mode())
			}
		}
		if fi, _ := os.Stat(scripts); fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s has mode %v, want 0700", scripts, fi.Mode())
		}
	})
	t.Run("an active virtual environment's python3 comes first", func(t *testing.T) {
		active := filepath.Join(t.TempDir(), "venv")
		if err := os.MkdirAll(filepath.Join(active, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(active, "bin", "python3"), []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
		src := filepath.Join(t.TempDir(), "s.py")
		if err := os.WriteFile(src, []byte("print(3)\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := d.runWith([]string{"VIRTUAL_ENV=" + active}, "", "queue-python", "--wait", src)
		r.want(t, 0, []string{"interpreter " + filepath.Join(active, "bin", "python3"), "args: " + src, "print(3)"}, nil)
	})
	t.Run("a refused submission leaves no script behind", func(t *testing.T) {
		before, _ := os.ReadDir(scripts)
		d.runWith(nil, "print(2)\n", "queue-python", "--device", "7", "-").want(t, 1, nil, []string{"no card 7"})
		after, _ := os.ReadDir(scripts)
		if len(after) != len(before) {
			t.Fatalf("%d scripts before, %d after a refused submission", len(before), len(after))
		}
	})
	t.Run("old scripts are pruned", func(t *testing.T) {
		old := filepath.Join(scripts, "script-old.py")
		if err := os.WriteFile(old, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		past := time.Now().Add(-3 * 24 * time.Hour)
		os.Chtimes(old, past, past)
		d.runWith([]string{"TT_DEVICE_RETENTION_DAYS=2"}, "pass\n", "queue-python", "-").want(t, 0, nil, nil)
		if _, err := os.Stat(old); !os.IsNotExist(err) {
			t.Fatalf("a 3-day-old script survived a 2-day retention: %v", err)
		}
	})
	t.Run("a missing script is a usage error", func(t *testing.T) {
		d.run("queue-python", filepath.Join(t.TempDir(), "nope.py")).want(t, 2, nil, []string{"reading the script", "nope.py"})
	})
}
