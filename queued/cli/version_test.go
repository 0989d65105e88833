package cli_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersion: both binaries print their version; status shows the
// daemon's and warns when the CLI is another build.
func TestVersion(t *testing.T) {
	t.Parallel()
	cliOut, err := exec.Command(filepath.Join(bin, "tt-device-queue"), "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(cliOut), "tt-device-queue ") {
		t.Fatalf("tt-device-queue --version: %q, %v", cliOut, err)
	}
	dOut, err := exec.Command(filepath.Join(bin, "queued"), "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(dOut), "queued ") {
		t.Fatalf("queued --version: %q, %v", dOut, err)
	}
	ver := strings.TrimSpace(strings.TrimPrefix(string(dOut), "queued "))
	d := startDaemon(t)
	d.run("status").want(t, 0, []string{"queued " + ver}, nil)
	if r := d.run("status"); strings.Contains(r.stderr, "warning") {
		t.Fatalf("same build, yet: %s", r.stderr)
	}

	other := filepath.Join(t.TempDir(), "tt-device-queue")
	build := exec.Command("go", "build", "-ldflags=-X github.com/ttkit/ttkit/queued/version.Release=v9.9.9-other", "-o", other,
		"github.com/ttkit/ttkit/queued/cmd/tt-device-queue")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building another CLI: %v\n%s", err, out)
	}
	cmd := exec.Command(other, "status")
	cmd.Env = d.env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "queued runs version "+ver+", this tt-device-queue is v9.9.9-other") {
		t.Fatalf("no warning about the other build: %q", stderr.String())
	}
}
