package ttsysfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Presence is what a fitness check reads of one card, cheaply (two stats
// and at most one small read): whether the driver's class directory is
// there at all, whether the card's own entry is, and its firmware
// heartbeat where the driver has one.
type Presence struct {
	// Class says sysfs has the tt-kmd class directory
	// (class/tenstorrent): false on a host without the driver's sysfs
	// entries (a container without /sys passed through, a driver too old
	// to create them), where nothing below can be judged.
	Class bool
	// Entry says the card's class directory (tenstorrent!N) is there.
	Entry bool
	// Heartbeat is tt_heartbeat; OK is false where the driver does not
	// have the attribute (or the card's entry is gone).
	Heartbeat Counter
}

// ReadPresence reads card n's Presence under the sysfs root (DefaultRoot
// when empty). Absent files are not errors (they are what Presence
// reports); a heartbeat that cannot be read for another reason
// (permission, I/O) or is not a decimal number is an error naming its
// file, with the presence read so far.
func ReadPresence(root string, n int) (Presence, error) {
	if root == "" {
		root = DefaultRoot
	}
	var p Presence
	class := filepath.Join(root, classDir)
	if _, err := os.Stat(class); err != nil {
		if absent(err) {
			return p, nil
		}
		return p, fmt.Errorf("card %d: %w", n, err)
	}
	p.Class = true
	dir := filepath.Join(class, "tenstorrent!"+strconv.Itoa(n))
	if _, err := os.Stat(dir); err != nil {
		if absent(err) {
			return p, nil
		}
		return p, fmt.Errorf("card %d: %w", n, err)
	}
	p.Entry = true
	path := filepath.Join(dir, "tt_heartbeat")
	b, err := os.ReadFile(path)
	switch {
	case err != nil && absent(err):
		return p, nil
	case err != nil:
		return p, fmt.Errorf("card %d: %w", n, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return p, nil // a device going away reads empty
	}
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return p, fmt.Errorf("card %d: %s: %q is not a number: %w", n, path, s, errors.Unwrap(err))
	}
	p.Heartbeat = Counter{Value: v, OK: true}
	return p, nil
}
