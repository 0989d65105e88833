package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// scripts/build-queued.sh, which make build, make install, the system
// install and the demo build with, links queued-exec's C start
// statically; where the static C library is missing (a C compiler whose
// static link fails, as on a host without libc6-dev or glibc-static), it
// builds the Go helper instead and says so, rather than failing the
// build.
func TestBuildScript_FallsBackToTheGoHelperWithoutAStaticLink(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	cc := filepath.Join(tmp, "cc-without-static-libc")
	script := "#!/bin/sh\nfor a; do [ \"$a\" = -static ] && { echo 'ld: cannot find -lc' >&2; exit 1; }; done\nexec gcc \"$@\"\n"
	if err := os.WriteFile(cc, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, cc, cgo string
		note          bool
	}{
		{"static libc", "gcc", "CGO_ENABLED=1", false},
		{"no static libc", cc, "CGO_ENABLED=0", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := filepath.Join(tmp, c.name)
			cmd := exec.Command("bash", "scripts/build-queued.sh", bin)
			cmd.Dir, cmd.Env = root, append(os.Environ(), "CC="+c.cc)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("build-queued.sh: %v\n%s", err, stderr.String())
			}
			if got := strings.Contains(stderr.String(), "takes its steps in Go"); got != c.note {
				t.Errorf("note about the Go helper: %v, want %v; stderr:\n%s", got, c.note, stderr.String())
			}
			if c.note && !strings.Contains(stderr.String(), "cannot find -lc") {
				t.Errorf("the note does not carry the linker's reason:\n%s", stderr.String())
			}
			for _, name := range []string{"queued", "queued-exec", "tt-device-queue"} {
				if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
					t.Errorf("%s was not built: %v", name, err)
				}
			}
			info, err := exec.Command("go", "version", "-m", filepath.Join(bin, "queued-exec")).Output()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(info), c.cgo) {
				t.Errorf("queued-exec built without %s:\n%s", c.cgo, info)
			}
		})
	}
}
