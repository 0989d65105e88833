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
