package ttsysfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Identity names one card as the host sees it: its PCI address and the
// board it is, from the driver's attributes where the driver gives them.
type Identity struct {
	// Number is N, the card's number (/dev/tenstorrent/N).
	Number int
	// PCIAddress is the card's PCI address (BDF, such as 0000:03:00.0):
	// what names a card exactly to tt-umd's TT_VISIBLE_DEVICES, whatever
	// order it enumerates the cards in.
	PCIAddress string
	// Info is the board's identity (card type, serial, ASIC id, firmware);
	// each field "" when its attribute is absent.
	Info Info
}

// ErrNoCard means sysfs has no class directory for the card.
var ErrNoCard = errors.New("no such card in sysfs")

// bdf is the shape of a PCI address.
var bdf = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// Identify reads card n's identity under the sysfs root (DefaultRoot
// when empty): the PCI address from the class directory's device link
// (/sys/class/tenstorrent/tenstorrent!N/device), read afresh each time so
// a card renumbered by a re-probe is the one named; and the identity
// attributes that are there. A card whose class directory is missing is
// ErrNoCard; a device link that names no PCI address is an error naming
// it.
func Identify(root string, n int) (Identity, error) {
	if root == "" {
		root = DefaultRoot
	}
	id := Identity{Number: n}
	dir := filepath.Join(root, classDir, "tenstorrent!"+strconv.Itoa(n))
	if _, err := os.Stat(dir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return id, fmt.Errorf("card %d: %s: %w", n, dir, ErrNoCard)
		}
		return id, fmt.Errorf("card %d: %w", n, err)
	}
	dev, err := filepath.EvalSymlinks(filepath.Join(dir, "device"))
	if err != nil {
		return id, fmt.Errorf("card %d: resolving %s: %w", n, filepath.Join(dir, "device"), err)
	}
	if addr := filepath.Base(dev); bdf.MatchString(addr) {
		id.PCIAddress = addr
	} else {
		return id, fmt.Errorf("card %d: its device link %s leads to %s, which is no PCI address", n, filepath.Join(dir, "device"), dev)
	}
	for i, name := range classStatic {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue // absent where the firmware does not report it
		}
		v := strings.TrimSpace(string(b))
		switch i {
		case 0:
			id.Info.CardType = v
		case 1:
			id.Info.Serial = v
		case 2:
			id.Info.ASICID = v
		case 3:
			id.Info.FirmwareBundle = v
		case 4:
			id.Info.M3AppFirmware = v
		}
	}
	return id, nil
}
