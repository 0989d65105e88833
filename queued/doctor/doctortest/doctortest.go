// Package doctortest lays out a fake host for tests of doctor and of the
// smoke test: a root tree with the KMD's procfs and sysfs files, device
// nodes (regular files), the driver's sysfs entries with a firmware
// heartbeat that moves, a mount table, PID namespace links, fake tt-smi
// and python3 programs, and a home with queued's user unit. Every part
// starts healthy; tests break the part they are about.
package doctortest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ttkit/ttkit/internal/kmdtest"
)

// Root is a fake host's root file system.
type Root struct {
	// Dir is the root (doctor --root).
	Dir string
	// KMD is the driver tree at Dir/proc/driver/tenstorrent.
	KMD *kmdtest.Tree
	// Bin holds the fake tt-smi and python3; Home is the user's home,
	// with ~/tenstorrent/.venv/bin linking to Bin.
	Bin, Home string
	// Sysfs is the driver's sysfs tree at Dir/sys; each card's
	// tt_heartbeat moves until StopBeat.
	Sysfs *kmdtest.Sysfs
	tb    testing.TB

	heartbeats *kmdtest.Heartbeats
}

// New lays out a healthy host with cards 0..cards-1 under dir.
func New(tb testing.TB, dir string, cards int) *Root {
	tb.Helper()
	r := &Root{Dir: dir, Bin: filepath.Join(dir, "fakebin"), Home: filepath.Join(dir, "home"), tb: tb}
	r.KMD = kmdtest.NewTree(tb, r.Path("/proc/driver/tenstorrent"))
	for n := 0; n < cards; n++ {
		r.KMD.SetPids(n)
		r.Write("/dev/tenstorrent/"+strconv.Itoa(n), "", 0o666)
	}
	r.Sysfs = kmdtest.BusySysfs(tb, dir, cards)
	all := make([]int, cards)
	for n := range all {
		all[n] = n
	}
	r.heartbeats = r.Sysfs.Beat(50*time.Millisecond, all...)
	r.SetKMDVersion("2.8.0")
	r.SetMounts("rw,nosuid,nodev,noexec,relatime")
	r.SetPIDNamespaces("pid:[4026531836]", "pid:[4026531836]")
	r.Write("/proc/self/status", "Name:\tdoctor\nNSpid:\t4242\n", 0o644)
	r.Write("/fakebin/tt-smi", "#!/bin/sh\necho 'tt-smi 3.0.12'\n", 0o755)
	r.Write("/fakebin/python3", "#!/bin/sh\n[ \"$1 $2\" = \"-c import tt_umd\" ] && exit 0\necho \"ModuleNotFoundError: No module named 'tt_umd'\" >&2\nexit 1\n", 0o755)
	r.Write("/home/.local/share/tt-device-queue/health_check.py", "", 0o644)
	if err := os.MkdirAll(r.Path("/home/tenstorrent/.venv"), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.Symlink(r.Bin, r.Path("/home/tenstorrent/.venv/bin")); err != nil {
		tb.Fatal(err)
	}
	r.Write("/home/.config/systemd/user/queued.service", "[Service]\n", 0o644)
	if err := os.MkdirAll(r.Path("/home/.config/systemd/user/default.target.wants"), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.Symlink("../queued.service", r.Path("/home/.config/systemd/user/default.target.wants/queued.service")); err != nil {
		tb.Fatal(err)
	}
	return r
}

// StopBeat stops card n's heartbeat where it stands: a hung firmware.
func (r *Root) StopBeat(n int) { r.heartbeats.Stall(n, true) }

// Path is p (absolute on the fake host) on the real file system.
func (r *Root) Path(p string) string { return filepath.Join(r.Dir, p) }

// Write writes a file of the fake host, creating its directory.
func (r *Root) Write(p, content string, mode os.FileMode) {
	r.tb.Helper()
	path := r.Path(p)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		r.tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		r.tb.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		r.tb.Fatal(err)
	}
}

// Remove deletes a file or tree of the fake host.
func (r *Root) Remove(p string) {
	r.tb.Helper()
	if err := os.RemoveAll(r.Path(p)); err != nil {
		r.tb.Fatal(err)
	}
}

// SetKMDVersion writes /sys/module/tenstorrent/version as the KMD does.
func (r *Root) SetKMDVersion(v string) { r.Write("/sys/module/tenstorrent/version", v+"\n", 0o444) }

// SetMounts writes a mount table whose /proc has the given super options.
func (r *Root) SetMounts(procOptions string) {
	r.Write("/proc/self/mountinfo", fmt.Sprintf(
		"21 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"+
			"22 21 0:20 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc %s\n"+
			"23 21 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n", procOptions), 0o644)
}

// SetPIDNamespaces points PID 1's and this process's PID namespace links
// at the given targets (equal: the host's namespace).
func (r *Root) SetPIDNamespaces(init, self string) {
	r.tb.Helper()
	for p, target := range map[string]string{"/proc/1/ns/pid": init, "/proc/self/ns/pid": self} {
		path := r.Path(p)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			r.tb.Fatal(err)
		}
		os.Remove(path)
		if err := os.Symlink(target, path); err != nil {
			r.tb.Fatal(err)
		}
	}
}
