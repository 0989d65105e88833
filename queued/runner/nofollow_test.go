package runner

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// plant puts a symlink at path that points at a file holding "secret",
// as a user who could write into the output directory would, and returns
// the target.
func plant(t *testing.T, path string) string {
	t.Helper()
	target := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(target, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	return target
}

func unchanged(t *testing.T, target string) {
	t.Helper()
	if b, err := os.ReadFile(target); err != nil || string(b) != "secret" {
		t.Errorf("the symlink's target was written through: %q, %v", b, err)
	}
}

// A symlink planted where a job's output file goes is replaced, never
// followed: root's write lands in a new file of its own.
func TestLog_SymlinkAtTheOutputPathIsNotFollowed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.log")
	target := plant(t, path)
	l := NewLog(path, 1<<20)
	l.Write([]byte("hello"))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	unchanged(t, target)
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("output path is %v, %v; want a regular file", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(path); string(b) != "hello" {
		t.Errorf("output %q, want hello", b)
	}
}

// A hard link planted there is replaced too: truncating it would truncate
// the file it shares an inode with.
func TestLog_HardLinkAtTheOutputPathIsReplaced(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "shadow")
	os.WriteFile(target, []byte("secret"), 0o600)
	path := filepath.Join(dir, "out.log")
	if err := os.Link(target, path); err != nil {
		t.Fatal(err)
	}
	l := NewLog(path, 1<<20)
	l.Write([]byte("hello"))
	l.Close()
	unchanged(t, target)
}

// A retried reset appends to its output file; a symlink there is an
// error, not a way to append to another file.
func TestResumeLog_RefusesASymlink(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.log")
	target := plant(t, path)
	l := ResumeLog(path, 1<<20)
	l.Write([]byte("hello"))
	l.Close()
	unchanged(t, target)
	if st := l.State(); st.Err == nil || !errors.Is(st.Err, syscall.ELOOP) {
		t.Errorf("log error %v, want ELOOP", st.Err)
	}
}

// The cut file written at Close is created the same way.
func TestLog_SymlinkAtTheCutPathIsNotFollowed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.log")
	target := plant(t, path+".cut")
	l := NewLog(path, 8)
	l.Write([]byte("0123456789abcdef"))
	l.Close()
	unchanged(t, target)
}

// Output is served from the file itself, never through a link.
func TestReadOutput_RefusesASymlink(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.log")
	plant(t, path)
	if data, _, _, err := ReadOutput(path, Layout{}, 0, 100); err == nil {
		t.Errorf("read %q through a symlink", data)
	}
}
