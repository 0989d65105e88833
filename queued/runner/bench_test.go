package runner

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BenchmarkSpawnFloor is the floor the queue's drain is measured against:
// `bash -c /bin/true` started and waited for from Go, nothing else.
func BenchmarkSpawnFloor(b *testing.B) {
	sh := Shell()
	for b.Loop() {
		if err := exec.Command(sh[0], sh[1], "/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRun is one job's worth of runner work: pipe, process group,
// output file, wait, group cleanup.
func BenchmarkRun(b *testing.B) {
	dir := b.TempDir()
	env := os.Environ()
	for b.Loop() {
		l := NewLog(filepath.Join(dir, "out"), 1<<20)
		if res := Run(Spec{Shell: Shell(), Cmd: "/bin/true", Dir: dir, Env: env}, l, nil); res.ExitCode != 0 {
			b.Fatalf("%+v", res)
		}
		l.Close()
	}
}
