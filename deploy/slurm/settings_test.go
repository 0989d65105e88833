package slurm_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// The shipped tt-slurm.env names every setting of tt-slurm.sh with its
// default, commented out, and the scripts accept it as it is.
func TestShippedSettings(t *testing.T) {
	t.Parallel()
	setting := regexp.MustCompile(`(?m)^#?(TT_SLURM_[A-Z_]+)=(.*)$`)
	read := func(name string) map[string]string {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, s := range setting.FindAllStringSubmatch(string(b), -1) {
			m[s[1]] = s[2]
		}
		return m
	}
	defaults, shipped := read("tt-slurm.sh"), read("tt-slurm.env")
	if len(defaults) < 10 || fmt.Sprint(defaults) != fmt.Sprint(shipped) {
		t.Errorf("tt-slurm.env's settings\n%v\ndiffer from tt-slurm.sh's defaults\n%v", shipped, defaults)
	}
	h := newHost(t)
	b, err := os.ReadFile("tt-slurm.env")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(h.scripts, "tt-slurm.env"), string(b)+"TT_SLURM_LOG="+h.log+"\n", 0o644)
	cmd := exec.Command("/bin/bash", "-c", `. "$1/tt-slurm.sh" && tt_load && echo "$PATH|$TT_DEVICE_URL|$HOME"`, "-", h.scripts)
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin|unix:///run/tt-device-queue/queued.sock|\n" {
		t.Errorf("loading the shipped tt-slurm.env: %v: %q", err, out)
	}
}
