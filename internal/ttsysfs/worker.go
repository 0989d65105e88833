package ttsysfs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// readCard reads one card; nil when its class directory is gone.
func (w *worker) readCard(c *cardState) (*Card, []error) {
	var errs []error
	if c.dir == "" {
		dir, err := filepath.EvalSymlinks(filepath.Join(w.class, "tenstorrent!"+strconv.Itoa(c.number)))
		if err != nil {
			if absent(err) {
				return nil, nil // gone between the listing and now
			}
			return nil, []error{fmt.Errorf("card %d: resolving its class directory: %w", c.number, err)}
		}
		c.dir = dir
		for i, name := range classDynamic {
			c.paths[dynAIClock+i] = dir + "/" + name
		}
		for i, name := range classStatic {
			c.paths[staticInfo+i] = dir + "/" + name
		}
		errs = append(errs, w.readStatic(c)...)
		// Spread the cards' later static reads over the period, so that
		// no read does all of them at once.
		c.staticAt -= uint64(c.number) % w.staticEvery
	} else if c.staticDue || w.reads-c.staticAt >= w.staticEvery {
		errs = append(errs, w.readStatic(c)...)
	}

	card := c.static
	card.Number = c.number
	for i, s := range sensors {
		v, ok, err := w.readHeld(c, i)
		if err != nil {
			errs = append(errs, fmt.Errorf("card %d: %w", c.number, err))
		}
		if ok {
			sensorOf(&card, i).Input = Reading{Value: float64(v) * s.scale, OK: true}
		}
	}
	if c.hwmon == "" {
		// No hwmon, or it vanished during this read: no sensor at all,
		// rather than the limits of one without its values.
		card.Arch = ""
		for i := range sensors {
			*sensorOf(&card, i) = Sensor{}
		}
	}
	for i, out := range [...]*Reading{&card.AIClock, &card.AXIClock, &card.ARCClock} {
		v, ok, err := w.readHeld(c, dynAIClock+i)
		if err != nil {
			errs = append(errs, fmt.Errorf("card %d: %w", c.number, err))
		}
		*out = Reading{Value: float64(v) * 1e6, OK: ok} // MHz -> Hz
	}
	for i, out := range [...]*Counter{&card.Heartbeat, &card.ThermalTrips} {
		v, ok, err := w.readHeld(c, dynHeartbeat+i)
		if err != nil {
			errs = append(errs, fmt.Errorf("card %d: %w", c.number, err))
		}
		if ok && v < 0 {
			errs = append(errs, fmt.Errorf("card %d: %s is negative: %d", c.number, c.paths[dynHeartbeat+i], v))
			ok = false
		}
		*out = Counter{Value: uint64(max(v, 0)), OK: ok}
	}
	return &card, errs
}

// readStatic finds the card's hwmon directory and reads what does not
// change while the card is up: each sensor's limit and the card's identity
// every time, and the hwmon name and labels when the directory is new.
func (w *worker) readStatic(c *cardState) []error {
	var errs []error
	fail := func(err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("card %d: %w", c.number, err))
		}
	}
	c.staticAt, c.staticDue = w.reads, false
	if c.hwmon == "" {
		hwmon, err := findHwmon(c.dir)
		fail(err)
		if hwmon != "" {
			w.useHwmon(c, hwmon, fail)
		}
	}
	// Open what is there and was not open: an attribute the firmware
	// starts to report is picked up here.
	for i, path := range c.paths {
		if c.fds[i] >= 0 || path == "" {
			continue
		}
		fd, err := openAttr(path)
		fail(err)
		c.fds[i] = fd
	}
	for i, s := range sensors {
		v, ok, err := w.readHeld(c, staticMax+i)
		fail(err)
		sensorOf(&c.static, i).Max = Reading{Value: float64(v) * s.scale, OK: ok}
	}
	var info [len(classStatic)]string
	for i := range classStatic {
		b, ok, err := w.readHeldRaw(c, staticInfo+i)
		fail(err)
		if ok {
			info[i] = labelValue(b)
		}
	}
	c.static.Info = Info{CardType: info[0], Serial: info[1], ASICID: info[2], FirmwareBundle: info[3], M3AppFirmware: info[4]}
	return errs
}

// useHwmon makes hwmon the card's hwmon directory: the paths of its
// inputs and limits, and its name and labels, read once.
func (w *worker) useHwmon(c *cardState, hwmon string, fail func(error)) {
	c.hwmon = hwmon
	str := func(path string) string {
		v, _, err := w.readString(path)
		fail(err)
		return v
	}
	c.static.Arch = str(hwmon + "/name")
	for i, s := range sensors {
		c.paths[i] = hwmon + "/" + s.channel + "_input"
		c.paths[staticMax+i] = hwmon + "/" + s.channel + "_max"
		*sensorOf(&c.static, i) = Sensor{Label: str(hwmon + "/" + s.channel + "_label")}
	}
}

// findHwmon returns the hwmon directory of the card whose class directory
// is dir (dir/device/hwmon/hwmon*, through the device link), or "" when it
// has none.
func findHwmon(dir string) (string, error) {
	parent := dir + "/device/hwmon"
	f, err := os.Open(parent)
	if absent(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("listing %s: %w", parent, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return "", fmt.Errorf("listing %s: %w", parent, err)
	}
	slices.Sort(names)
	for _, name := range names {
		if strings.HasPrefix(name, "hwmon") {
			return parent + "/" + name, nil
		}
	}
	return "", nil
}

// sensorOf returns Card's sensor i, in the order of sensors.
func sensorOf(c *Card, i int) *Sensor {
	return [...]*Sensor{&c.Temperature, &c.Voltage, &c.Current, &c.Power, &c.Fan}[i]
}
