package runner

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ttkit/ttkit/internal/usertest"
	"github.com/ttkit/ttkit/queued/account"
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

// BenchmarkRunAsUser is BenchmarkRun in system mode: the job runs as
// another user (credentials set in the child, a session keyring of its
// own from a thread of its own). Compare with BenchmarkRun for the cost.
func BenchmarkRunAsUser(b *testing.B) {
	u := usertest.New(b, "ttqbench")
	a, err := account.LookupUID(u.UID)
	if err != nil {
		b.Fatal(err)
	}
	dir := usertest.OpenDir(b)
	out := b.TempDir()
	env := append([]string{"PATH=/usr/bin:/bin"}, a.Env()...)
	for b.Loop() {
		l := NewLog(filepath.Join(out, "out"), 1<<20)
		if res := Run(Spec{Shell: Shell(), Cmd: "/bin/true", Dir: dir, Env: env, Account: &a}, l, nil); res.ExitCode != 0 {
			b.Fatalf("%+v", res)
		}
		l.Close()
	}
}
