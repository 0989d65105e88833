package cli_test

import (
	"os"
	"strings"
	"testing"
)

// make install-system ENFORCE=1 (issue 44) installs the udev rule that
// makes card nodes root's alone, root-owned 0644 in DESTDIR's
// etc/udev/rules.d, and turns TT_DEVICE_ENFORCE=acl on in a new settings
// template; without ENFORCE neither happens, and a bad value is refused.
func TestInstallSystemScript_Enforce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries again")
	}
	if os.Geteuid() != 0 {
		t.Skip("installs root-owned files; CI runs as root")
	}
	s := newSystemInstall(t)
	s.run("ENFORCE=yes").want(t, 1, nil, []string{`ENFORCE="yes"`, "want 1"})
	s.run("ENFORCE=1").want(t, 0, []string{"Installed the udev rule", "udevadm"}, nil)
	s.wantFile("etc/udev/rules.d/60-tenstorrent-queued.rules", 0o644)
	shipped, err := os.ReadFile("../../deploy/udev/60-tenstorrent-queued.rules")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.read("etc/udev/rules.d/60-tenstorrent-queued.rules"); got != string(shipped) {
		t.Errorf("installed rule differs from deploy/udev:\n%s", got)
	}
	if d := s.read("etc/default/tt-device-queue"); !strings.Contains(d, "\nTT_DEVICE_ENFORCE=acl\n") {
		t.Errorf("settings template without TT_DEVICE_ENFORCE=acl:\n%s", d)
	}

	plain := newSystemInstall(t)
	plain.run("NO_BUILD=1").want(t, 0, nil, nil)
	if _, err := os.Stat(plain.dest + "/etc/udev/rules.d/60-tenstorrent-queued.rules"); err == nil {
		t.Error("the udev rule was installed without ENFORCE=1")
	}
	if d := plain.read("etc/default/tt-device-queue"); !strings.Contains(d, "\n#TT_DEVICE_ENFORCE=acl\n") {
		t.Errorf("settings template without the commented TT_DEVICE_ENFORCE line:\n%s", d)
	}
}
