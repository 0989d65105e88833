package main

import (
	"os"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/config"
)

// The settings table of docs/operations.md is the declaration's: a
// setting added, renamed or given another default without `go generate
// ./queued/config` fails here.
func TestOperationsTableIsTheDeclarations(t *testing.T) {
	const path = "../../../docs/operations.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := splice(string(b), table(config.Settings))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Fatalf("%s's settings table differs from queued/config's declaration; run go generate ./queued/config and commit", path)
	}
	// Every setting has its row, by variable and by flag.
	for _, s := range config.Settings {
		for _, name := range []string{s.Env, s.Flag} {
			if name != "" && !strings.Contains(want, "| `"+name+"` |") {
				t.Errorf("the table has no cell for %s", name)
			}
		}
	}
}

func TestSplice(t *testing.T) {
	doc := "# Settings\n\n" + begin + "\nold\n" + end + "\nafter\n"
	got, err := splice(doc, "| new |\n")
	if err != nil || got != "# Settings\n\n"+begin+"\n\n| new |\n\n"+end+"\nafter\n" {
		t.Fatalf("splice = %q, %v", got, err)
	}
	if _, err := splice("no markers", "x"); err != errNoMarkers {
		t.Fatalf("splice without markers: %v", err)
	}
}

func TestSize(t *testing.T) {
	for raw, want := range map[string]string{"16777216": "16 MiB", "4294967296": "4 GiB", "2048": "2 KiB", "1000": "1000 B"} {
		if got := size(raw); got != want {
			t.Errorf("size(%s) = %q, want %q", raw, got, want)
		}
	}
}

// docs/system-mode.md explains the settings system mode adds in a table
// of its own, by hand: each row must be a declared setting, and every
// setting only system mode reads, and the one that turns it on, must have
// a row.
func TestSystemModeSettingsAreDeclared(t *testing.T) {
	const path = "../../../docs/system-mode.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n### 2. Settings\n")
	if !ok {
		t.Fatalf("%s has no section 2. Settings", path)
	}
	section, _, _ = strings.Cut(section, "\n### ")
	rows := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		if v, ok := strings.CutPrefix(line, "| `"); ok {
			name, _, _ := strings.Cut(v, "`")
			rows[name] = true
		}
	}
	declared := map[string]config.Setting{}
	for _, s := range config.Settings {
		declared[s.Env] = s
	}
	for name := range rows {
		if _, ok := declared[name]; !ok {
			t.Errorf("%s's settings table has %s, which queued/config does not declare", path, name)
		}
	}
	for _, s := range config.Settings {
		if (s.SystemOnly || s.Env == "TT_DEVICE_SOCKET") && !rows[s.Env] {
			t.Errorf("%s's settings table has no row for %s", path, s.Env)
		}
	}
	if len(rows) == 0 {
		t.Fatalf("no settings rows in %s's section 2. Settings", path)
	}
}
