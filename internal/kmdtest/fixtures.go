package kmdtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Testdata is the repository's top-level testdata directory: the fixtures
// both products' tests share (fake KMD trees, the friendly-name corpus, the
// Python tt-device-queue's database). It is found by walking up from the
// test's working directory to go.mod.
func Testdata(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "testdata")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// CopyTree copies the fake driver tree testdata/kmd/<name> into a temp
// dir and returns the copy, so a test may change it.
func CopyTree(tb testing.TB, name string) string {
	tb.Helper()
	src := filepath.Join(Testdata(tb), "kmd", name)
	dst := filepath.Join(tb.TempDir(), name)
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		tb.Fatalf("copying %s: %v", src, err)
	}
	return dst
}

// CorpusLine is one command line of a friendly-name corpus and the name it
// must get.
type CorpusLine struct {
	CommandLine, FriendlyName string
}

// Corpus reads testdata/friendlyname/<name>.tsv: one command line, a tab
// and its friendly name per line; # starts a comment.
func Corpus(tb testing.TB, name string) []CorpusLine {
	tb.Helper()
	path := filepath.Join(Testdata(tb), "friendlyname", name+".tsv")
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []CorpusLine
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cmd, want, ok := strings.Cut(line, "\t")
		if !ok || cmd == "" || want == "" {
			tb.Fatalf("%s:%d: want <command line> TAB <friendly name>: %q", path, n, line)
		}
		out = append(out, CorpusLine{cmd, want})
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	if len(out) == 0 {
		tb.Fatal(errors.New(path + " holds no lines"))
	}
	return out
}

// MakeLegacyDB builds a jobs.sqlite3 laid out as the Python
// tt-device-queue's, with python3's own sqlite3 module, by
// testdata/python-tool/make_db.py; spec (its "path", tables and rows) is
// described in that script.
func MakeLegacyDB(tb testing.TB, spec map[string]any) {
	tb.Helper()
	body, err := json.Marshal(spec)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command("python3", filepath.Join(Testdata(tb), "python-tool", "make_db.py"))
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("building %v: %v\n%s", spec["path"], err, out)
	}
}

// BootID is this boot's id, as queued records it on a dead card.
func BootID(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		tb.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
