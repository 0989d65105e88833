package doctor

import (
	"errors"
	"fmt"
	"github.com/ttkit/ttkit/queued/api"
	"os"
	"sort"
	"strconv"
	"strings"
)

// The KMD versions that matter to the pids files otelcol-tt and queued
// read (see docs/operations.md for the sources):
//   - pidsFileVersion added /proc/driver/tenstorrent/<n>/pids (tt-kmd
//     2.5.0, "Add procfs file to list PIDs with open device fds"); it
//     printed each PID as the opener's PID namespace numbered it.
//   - pidVnrVersion is the first release we could confirm renders each PID
//     in the reader's namespace (pid_vnr at read time, tt-kmd pull request
//     191, merged 2025-12-19). Releases between the two may have it; we
//     could not confirm which, so they get a warning, not a pass.
var (
	pidsFileVersion = version{2, 5, 0}
	pidVnrVersion   = version{2, 8, 0}
)

// version is a KMD release number.
type version [3]int

func (v version) less(o version) bool {
	for i := range v {
		if v[i] != o[i] {
			return v[i] < o[i]
		}
	}
	return false
}

func (v version) String() string { return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]) }

// parseVersion reads "2.8.0", "2.8" or "2.8.0-rc1" (the suffix is ignored).
func parseVersion(s string) (version, error) {
	var v version
	s = strings.TrimSpace(s)
	core, _, _ := strings.Cut(s, "-")
	parts := strings.Split(core, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return v, fmt.Errorf("%q is not a KMD version (want MAJOR.MINOR.PATCH)", s)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, fmt.Errorf("%q is not a KMD version (want MAJOR.MINOR.PATCH)", s)
		}
		v[i] = n
	}
	return v, nil
}

// numericEntries lists the names under dir that are card numbers, sorted.
func numericEntries(dir string, wantDir bool) ([]int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var ids []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil || n < 0 || strconv.Itoa(n) != e.Name() {
			continue
		}
		if wantDir && !e.IsDir() {
			continue
		}
		ids = append(ids, n)
	}
	sort.Ints(ids)
	return ids, nil
}

func joinInts(ids []int) string {
	if len(ids) == 0 {
		return "none"
	}
	s := make([]string, len(ids))
	for i, n := range ids {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

const kmdFix = "install tt-kmd (the tenstorrent-dkms package) and load it: sudo modprobe tenstorrent"

func checkKMD(h Host) Check {
	c := Check{Name: "kmd"}
	ids, err := numericEntries(h.DriverPath, true)
	switch {
	case errors.Is(err, os.ErrNotExist):
		c.Status, c.Detail, c.Fix = Fail, h.DriverPath+" does not exist: the KMD is not loaded, or is older than 2.5.0", kmdFix+"; if it lives elsewhere, set TT_DEVICE_DRIVER_PATH"
	case err != nil:
		c.Status, c.Detail, c.Fix = Fail, fmt.Sprintf("listing %s: %v", h.DriverPath, err), "make "+h.DriverPath+" readable by this user"
	case len(ids) == 0:
		c.Status, c.Detail, c.Fix = Fail, h.DriverPath+" lists no card", "check that the cards are seated and seen (lspci -d 1e52:), then reload the KMD: sudo modprobe -r tenstorrent && sudo modprobe tenstorrent"
	default:
		var missing []int
		for _, n := range ids {
			if _, err := os.Stat(fmt.Sprintf("%s/%d/pids", h.DriverPath, n)); err != nil {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			c.Status, c.Detail, c.Fix = Fail, fmt.Sprintf("%s lists cards %s but cards %s have no pids file", h.DriverPath, joinInts(ids), joinInts(missing)), "upgrade tt-kmd to "+pidVnrVersion.String()+" or later"
			return c
		}
		c.Status, c.Detail = OK, fmt.Sprintf("%s lists cards %s", h.DriverPath, joinInts(ids))
	}
	return c
}

func checkKMDVersion(h Host, loaded bool) Check {
	c := Check{Name: "kmd-version"}
	b, err := os.ReadFile(h.VersionFile)
	if err != nil {
		if !loaded {
			c.Status, c.Detail = Skip, "the KMD is not loaded"
			return c
		}
		c.Status, c.Detail, c.Fix = Warn, fmt.Sprintf("reading %s: %v; cannot tell whether the pids files show PIDs per namespace", h.VersionFile, err), "upgrade tt-kmd to "+pidVnrVersion.String()+" or later to be sure"
		return c
	}
	v, err := parseVersion(string(b))
	if err != nil {
		c.Status, c.Detail, c.Fix = Warn, fmt.Sprintf("%s: %v", h.VersionFile, err), "upgrade tt-kmd to "+pidVnrVersion.String()+" or later"
		return c
	}
	switch {
	case v.less(pidsFileVersion):
		c.Status, c.Detail, c.Fix = Fail, fmt.Sprintf("tt-kmd %s has no pids files (added in %s): otelcol-tt sees no holder and queued no foreign process", v, pidsFileVersion), "upgrade tt-kmd to "+pidVnrVersion.String()+" or later"
	case v.less(pidVnrVersion):
		c.Status, c.Detail, c.Fix = Warn, fmt.Sprintf("tt-kmd %s: its pids files may number a containerised holder in the holder's own PID namespace (pid_vnr at read time is confirmed from %s)", v, pidVnrVersion), "upgrade tt-kmd to "+pidVnrVersion.String()+" or later"
	default:
		c.Status, c.Detail = OK, fmt.Sprintf("tt-kmd %s renders each PID in the reader's namespace (pid_vnr)", v)
	}
	return c
}

func checkNodes(h Host, loaded bool) Check {
	c := Check{Name: "device-nodes"}
	nodes, err := numericEntries(h.DevDir, false)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		c.Status, c.Detail, c.Fix = Fail, fmt.Sprintf("listing %s: %v", h.DevDir, err), "make "+h.DevDir+" readable by this user"
		return c
	}
	if len(nodes) == 0 {
		c.Status, c.Detail, c.Fix = Fail, h.DevDir+" has no card node", kmdFix+"; inside a container, pass /dev/tenstorrent through"
		return c
	}
	has := func(list []int, n int) bool {
		for _, m := range list {
			if m == n {
				return true
			}
		}
		return false
	}
	var problems []string
	fix := ""
	if loaded {
		driver, _ := numericEntries(h.DriverPath, true)
		var noNode, noDriver []int
		for _, n := range driver {
			if !has(nodes, n) {
				noNode = append(noNode, n)
			}
		}
		for _, n := range nodes {
			if !has(driver, n) {
				noDriver = append(noDriver, n)
			}
		}
		if len(noNode) > 0 {
			problems = append(problems, fmt.Sprintf("the KMD lists cards %s with no node in %s", joinInts(noNode), h.DevDir))
			fix = "reload udev rules (sudo udevadm trigger) or reinstall tt-kmd; inside a container, pass every /dev/tenstorrent/<n> through"
		}
		if len(noDriver) > 0 {
			problems = append(problems, fmt.Sprintf("nodes %s have no directory in %s", joinInts(noDriver), h.DriverPath))
			fix = "reload the KMD (sudo modprobe -r tenstorrent && sudo modprobe tenstorrent)"
		}
	}
	failed := false
	if h.Cards != nil {
		var missing []int
		for _, n := range h.Cards {
			if !has(nodes, n) {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			failed = true
			problems = append(problems, fmt.Sprintf("queued serves cards %s (from %s) but %s has no node for %s", joinInts(h.Cards), h.CardsFrom, h.DevDir, joinInts(missing)))
			fix = fmt.Sprintf("set TT_DEVICE_IDS in ~/.config/tt-device-queue/queued.env to cards that exist (%s) and restart queued while it is idle", joinInts(nodes))
		}
	}
	switch {
	case failed:
		c.Status = Fail
	case len(problems) > 0:
		c.Status = Warn
	default:
		served := "every node (TT_DEVICE_IDS unset)"
		if h.Cards != nil {
			served = fmt.Sprintf("cards %s (from %s)", joinInts(h.Cards), h.CardsFrom)
		}
		c.Status, c.Detail = OK, fmt.Sprintf("%s has nodes %s, matching the KMD; queued serves %s", h.DevDir, joinInts(nodes), served)
		return c
	}
	c.Detail, c.Fix = strings.Join(problems, "; "), fix
	return c
}

// checkCards names the cards queued serves (type, serial, PCI address,
// from sysfs) and warns where a tt-metal job would open cards it was not
// queued for: several cards on the host (its nodes in devDir, whether
// queued serves them all or not: tt-umd opens every card it sees), tt-umd
// installed, and queued not setting TT_VISIBLE_DEVICES
// (TT_DEVICE_VISIBLE=bdf).
func checkCards(st *api.Status, umd bool, devDir string) Check {
	c := Check{Name: "cards"}
	if st == nil {
		c.Status, c.Detail = Skip, "queued did not answer"
		return c
	}
	var names []string
	for _, cs := range st.Cards {
		name := "card " + cs.DeviceID
		if cs.CardType != "" {
			name += " " + cs.CardType
		}
		if cs.PCIAddress != "" {
			name += " at " + cs.PCIAddress
		}
		names = append(names, name)
	}
	c.Status, c.Detail = OK, strings.Join(names, "; ")
	nodes, _ := numericEntries(devDir, false)
	cards := fmt.Sprintf("%d cards", len(st.Cards))
	if len(nodes) > len(st.Cards) {
		cards = fmt.Sprintf("%d cards on the host (queued serves %d)", len(nodes), len(st.Cards))
	}
	if max(len(st.Cards), len(nodes)) > 1 && umd && st.VisibleDevices != "bdf" {
		c.Status = Warn
		c.Detail = fmt.Sprintf("%s and tt-umd is installed, and queued leaves TT_VISIBLE_DEVICES alone: a tt-metal job queued on one card opens every card it sees, and two such jobs on different cards hang each other (%s)",
			cards, c.Detail)
		c.Fix = "queue a job that uses several cards with --device 0,1 (or 0-3); set TT_DEVICE_VISIBLE=bdf in queued's settings so each job sees only its own cards; TT_DEVICE_CROSS_CARD=kill ends a job that opens another's card"
	}
	return c
}
