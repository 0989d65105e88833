package kmdtest

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Sysfs is a fake sysfs tree of Tenstorrent cards laid out as tt-kmd and
// the kernel lay it out: /sys/class/tenstorrent/tenstorrent!N is a symlink
// to the card's class device under its PCI device in /sys/devices, whose
// device link leads back to the PCI device, which holds hwmon/hwmonM.
type Sysfs struct {
	// Root is the sysfs path (the "sys" directory) to hand to the code
	// under test.
	Root string
	tb   testing.TB
}

// CopySysfs copies the fake sysfs of testdata/sysfs/<kind> (n300, p150)
// into a temp dir, symlinks kept, so a test may change it.
func CopySysfs(tb testing.TB, kind string) *Sysfs {
	tb.Helper()
	src := filepath.Join(Testdata(tb), "sysfs", kind)
	dst := filepath.Join(tb.TempDir(), kind)
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case d.IsDir():
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
	return &Sysfs{Root: filepath.Join(dst, "sys"), tb: tb}
}

// BusySysfs writes a fake sysfs of n Blackhole p150a cards under dir, each
// with every hwmon sensor and telemetry attribute tt-kmd exposes for it.
func BusySysfs(tb testing.TB, dir string, n int) *Sysfs {
	tb.Helper()
	s := &Sysfs{Root: filepath.Join(dir, "sys"), tb: tb}
	for card := range n {
		pci := fmt.Sprintf("devices/pci0000:%02x/0000:%02x:00.0", card/32, card%32+1)
		dev := filepath.Join(s.Root, pci)
		hwmon := fmt.Sprintf("hwmon%d", card+2)
		files := map[string]string{
			"hwmon/" + hwmon + "/name": "blackhole",
		}
		for _, sensor := range [][4]string{
			{"temp1", "asic_temp", strconv.Itoa(55000 + card*125), "90000"},
			{"in0", "vcore", "765", "900"},
			{"curr1", "current", "112500", "250000"},
			{"power1", "power", strconv.Itoa(86000000 + card*1000), "300000000"},
			{"fan1", "fan", "2430", "6000"},
		} {
			files["hwmon/"+hwmon+"/"+sensor[0]+"_label"] = sensor[1]
			files["hwmon/"+hwmon+"/"+sensor[0]+"_input"] = sensor[2]
			files["hwmon/"+hwmon+"/"+sensor[0]+"_max"] = sensor[3]
		}
		class := "tenstorrent/tenstorrent!" + strconv.Itoa(card) + "/"
		for name, v := range map[string]string{
			"tt_aiclk": "1350", "tt_axiclk": "1000", "tt_arcclk": "800", "tt_heartbeat": strconv.Itoa(1000 + card),
			"tt_therm_trip_count": "0", "tt_card_type": "p150a", "tt_serial": fmt.Sprintf("00000427312061%02X", card),
			"tt_asic_id": fmt.Sprintf("7C2E91D4A0B35F%02X", card), "tt_fw_bundle_ver": "18.7.0.0", "tt_m3app_fw_ver": "0.24.0.0",
		} {
			files[class+name] = v
		}
		for name, v := range files {
			s.write(filepath.Join(dev, name), v+"\n")
		}
		s.link("../../../"+filepath.Base(pci), filepath.Join(dev, "tenstorrent", "tenstorrent!"+strconv.Itoa(card), "device"))
		s.link("../../../"+filepath.Base(pci), filepath.Join(dev, "hwmon", hwmon, "device"))
		s.link("../../"+pci+"/tenstorrent/tenstorrent!"+strconv.Itoa(card),
			filepath.Join(s.Root, "class", "tenstorrent", "tenstorrent!"+strconv.Itoa(card)))
	}
	return s
}

// CardDir is card n's class directory, through the class symlink.
func (s *Sysfs) CardDir(n int) string {
	return filepath.Join(s.Root, "class", "tenstorrent", "tenstorrent!"+strconv.Itoa(n))
}

// HwmonDir is card n's hwmon directory, symlinks resolved.
func (s *Sysfs) HwmonDir(n int) string {
	s.tb.Helper()
	matches, err := filepath.Glob(filepath.Join(s.CardDir(n), "device", "hwmon", "hwmon*"))
	if err != nil || len(matches) != 1 {
		s.tb.Fatalf("card %d: hwmon directories %v (%v)", n, matches, err)
	}
	dir, err := filepath.EvalSymlinks(matches[0])
	if err != nil {
		s.tb.Fatal(err)
	}
	return dir
}

// Set writes an attribute of card n: name is relative to its class
// directory (tt_heartbeat), or to its hwmon directory when it starts with
// hwmon/ (hwmon/temp1_input).
func (s *Sysfs) Set(n int, name, value string) {
	s.tb.Helper()
	if rest, ok := strings.CutPrefix(name, "hwmon/"); ok {
		s.write(filepath.Join(s.HwmonDir(n), rest), value+"\n")
		return
	}
	s.write(filepath.Join(s.CardDir(n), name), value+"\n")
}

// Remove deletes an attribute of card n, named as for Set.
func (s *Sysfs) Remove(n int, name string) {
	s.tb.Helper()
	path := filepath.Join(s.CardDir(n), name)
	if rest, ok := strings.CutPrefix(name, "hwmon/"); ok {
		path = filepath.Join(s.HwmonDir(n), rest)
	}
	if err := os.Remove(path); err != nil {
		s.tb.Fatal(err)
	}
}

// RemoveHwmon deletes card n's hwmon directory, as the kernel does when
// the driver unregisters it (a reset, a firmware that stopped answering),
// and returns its files' contents by name. Each file is emptied first: a
// descriptor a reader holds then reads nothing, as a held sysfs descriptor
// fails with ENODEV once its device is gone (a deleted file of an ordinary
// filesystem would go on reading its old value).
func (s *Sysfs) RemoveHwmon(n int) map[string]string {
	s.tb.Helper()
	dir := s.HwmonDir(n)
	entries, err := os.ReadDir(dir)
	if err != nil {
		s.tb.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			s.tb.Fatal(err)
		}
		files[e.Name()] = string(b)
		if err := os.Truncate(path, 0); err != nil {
			s.tb.Fatal(err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		s.tb.Fatal(err)
	}
	return files
}

// AddHwmon gives card n a hwmon directory named name (hwmon9) holding
// files, as the kernel does when the driver registers it again.
func (s *Sysfs) AddHwmon(n int, name string, files map[string]string) {
	s.tb.Helper()
	dir := filepath.Join(s.CardDir(n), "device", "hwmon", name)
	for file, content := range files {
		s.write(filepath.Join(dir, file), content)
	}
}

func (s *Sysfs) write(path, content string) {
	s.tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		s.tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		s.tb.Fatal(err)
	}
}

func (s *Sysfs) link(target, at string) {
	s.tb.Helper()
	if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
		s.tb.Fatal(err)
	}
	if err := os.Symlink(target, at); err != nil {
		s.tb.Fatal(err)
	}
}

// Beat moves the tt_heartbeat of cards every interval until the test
// ends (see Heartbeats); a card the test removed stops beating.
func (s *Sysfs) Beat(every time.Duration, cards ...int) *Heartbeats {
	s.tb.Helper()
	files := make(map[int]string, len(cards))
	for _, n := range cards {
		files[n] = filepath.Join(s.CardDir(n), "tt_heartbeat")
	}
	return StartHeartbeats(s.tb, every, files)
}
