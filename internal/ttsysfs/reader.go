package ttsysfs

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Defaults of Options.
const (
	// DefaultRoot is where sysfs is mounted.
	DefaultRoot = "/sys"
	// DefaultStaticEvery is how many reads pass between two reads of the
	// attributes that do not change while a card is up: about five minutes
	// at the collector's 10 s, which bounds how long a flashed firmware's
	// old version is still reported.
	DefaultStaticEvery = 30
)

// classDir is the tt-kmd class directory under the sysfs root.
const classDir = "class/tenstorrent"

// maxString bounds a string attribute (a card type, serial or version):
// they become label values.
const maxString = 64

// Options configures a Reader.
type Options struct {
	// Root is the sysfs mount; default DefaultRoot. In a container that
	// mounts the host's sysfs elsewhere, point it there.
	Root string
	// StaticEvery is how many reads pass between two reads of each card's
	// labels, limits, hwmon name and identity; default DefaultStaticEvery.
	// They are also read whenever the card's hwmon directory changes.
	StaticEvery int
}

// sensors are the hwmon channels read, in Card's order, with the factor
// that turns hwmon's unit into the SI one.
var sensors = [...]struct {
	channel string
	scale   float64
}{
	{"temp1", 1e-3},  // m°C -> °C
	{"in0", 1e-3},    // mV -> V
	{"curr1", 1e-3},  // mA -> A
	{"power1", 1e-6}, // µW -> W
	{"fan1", 1},      // RPM
}

// Indexes of the attributes read every time: the hwmon inputs, in the
// order of sensors, then the class directory's.
const (
	dynAIClock = len(sensors) + iota
	dynAXIClock
	dynARCClock
	dynHeartbeat
	dynThermalTrips
	nDynamic
)

// classDynamic are the class directory's attributes read every time, from
// dynAIClock on.
var classDynamic = [...]string{"tt_aiclk", "tt_axiclk", "tt_arcclk", "tt_heartbeat", "tt_therm_trip_count"}

// Reader reads every card's attributes. It is not safe for concurrent use.
type Reader struct {
	root        string
	class       string
	staticEvery uint64

	reads uint64
	cards map[int]*cardState
	// Scratch reused from read to read.
	numbers []int
	buf     [128]byte
}

// cardState is what the reader keeps of one card between reads.
type cardState struct {
	number int
	dir    string // the class directory, symlinks resolved
	hwmon  string // the hwmon directory (through the device link); "" if none
	// staticAt is the read that last read the static attributes;
	// staticDue asks for them (and the hwmon directory) at the next read.
	staticAt  uint64
	staticDue bool
	seen      uint64
	static    Card // Arch, labels, limits and Info
	paths     [nDynamic]string
	// fds holds each attribute read every time open, -1 for one that is
	// absent (looked for again with the static attributes).
	fds [nDynamic]int
}

// closeFDs closes the descriptors from..to-1.
func (c *cardState) closeFDs(from, to int) {
	for i := from; i < to; i++ {
		if c.fds[i] >= 0 {
			unix.Close(c.fds[i])
			c.fds[i] = -1
		}
	}
}

// New returns a Reader for opts, filling in the defaults.
func New(opts Options) *Reader {
	root := cmp.Or(opts.Root, DefaultRoot)
	every := opts.StaticEvery
	if every <= 0 {
		every = DefaultStaticEvery
	}
	return &Reader{
		root:        root,
		class:       filepath.Join(root, classDir),
		staticEvery: uint64(every),
		cards:       make(map[int]*cardState),
	}
}

// Read appends to into every card found, sorted by number, and returns the
// errors met along the way. A sysfs without the tenstorrent class (no
// driver loaded) has no cards and no error. An attribute that is absent is
// left out of its Card; only real read errors are returned, each naming
// the file, and the rest is read all the same.
func (r *Reader) Read(into []Card) ([]Card, []error) {
	r.reads++
	var errs []error
	numbers, err := r.list(r.numbers[:0])
	r.numbers = numbers
	if err != nil {
		return into, []error{err}
	}
	for _, n := range numbers {
		c := r.cards[n]
		if c == nil {
			c = newCardState(n)
			r.cards[n] = c
		}
		c.seen = r.reads
		card, cerrs := r.readCard(c)
		errs = append(errs, cerrs...)
		if card != nil {
			into = append(into, *card)
		}
	}
	for n, c := range r.cards {
		if c.seen != r.reads {
			c.closeFDs(0, nDynamic)
			delete(r.cards, n)
		}
	}
	return into, errs
}

// Close closes the descriptors the reader holds. The Reader stays usable:
// the next Read opens them again.
func (r *Reader) Close() error {
	for n, c := range r.cards {
		c.closeFDs(0, nDynamic)
		delete(r.cards, n)
	}
	return nil
}

func newCardState(n int) *cardState {
	c := &cardState{number: n}
	for i := range c.fds {
		c.fds[i] = -1
	}
	return c
}

// list appends the numbers of the class directory's tenstorrent!N entries,
// sorted.
func (r *Reader) list(into []int) ([]int, error) {
	f, err := os.Open(r.class)
	if errors.Is(err, fs.ErrNotExist) {
		return into, nil
	}
	if err != nil {
		return into, fmt.Errorf("listing %s: %w", r.class, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return into, fmt.Errorf("listing %s: %w", r.class, err)
	}
	for _, name := range names {
		num, ok := strings.CutPrefix(name, "tenstorrent!")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(num); err == nil && n >= 0 && strconv.Itoa(n) == num {
			into = append(into, n)
		}
	}
	slices.Sort(into)
	return into, nil
}

// readCard reads one card; nil when its class directory is gone.
func (r *Reader) readCard(c *cardState) (*Card, []error) {
	var errs []error
	if c.dir == "" {
		dir, err := filepath.EvalSymlinks(filepath.Join(r.class, "tenstorrent!"+strconv.Itoa(c.number)))
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
		errs = append(errs, r.readStatic(c)...)
		// Spread the cards' later static reads over the period, so that
		// no read does all of them at once.
		c.staticAt -= uint64(c.number) % r.staticEvery
	} else if c.staticDue || r.reads-c.staticAt >= r.staticEvery {
		errs = append(errs, r.readStatic(c)...)
	}

	card := c.static
	card.Number = c.number
	for i, s := range sensors {
		v, ok, err := r.readDynamic(c, i)
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
		v, ok, err := r.readDynamic(c, dynAIClock+i)
		if err != nil {
			errs = append(errs, fmt.Errorf("card %d: %w", c.number, err))
		}
		*out = Reading{Value: float64(v) * 1e6, OK: ok} // MHz -> Hz
	}
	for i, out := range [...]*Counter{&card.Heartbeat, &card.ThermalTrips} {
		v, ok, err := r.readDynamic(c, dynHeartbeat+i)
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
func (r *Reader) readStatic(c *cardState) []error {
	var errs []error
	c.staticAt, c.staticDue = r.reads, false
	hwmon, err := findHwmon(c.dir)
	if err != nil {
		errs = append(errs, fmt.Errorf("card %d: %w", c.number, err))
	}
	str := func(path string) string {
		v, _, err := r.readString(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("card %d: %w", c.number, err))
		}
		return v
	}
	if hwmon != c.hwmon {
		c.closeFDs(0, len(sensors))
		c.hwmon = hwmon
		c.static.Arch = ""
		for i, s := range sensors {
			c.paths[i] = ""
			*sensorOf(&c.static, i) = Sensor{}
			if hwmon != "" {
				c.paths[i] = hwmon + "/" + s.channel + "_input"
				sensorOf(&c.static, i).Label = str(hwmon + "/" + s.channel + "_label")
			}
		}
		if hwmon != "" {
			c.static.Arch = str(hwmon + "/name")
		}
	}
	// Open what is there and was not open: an attribute the firmware
	// starts to report is picked up here.
	for i, path := range c.paths {
		if c.fds[i] >= 0 || path == "" {
			continue
		}
		fd, err := openAttr(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("card %d: %w", c.number, err))
		}
		c.fds[i] = fd
	}
	if hwmon != "" {
		for i, s := range sensors {
			v, ok, err := r.readInt(hwmon + "/" + s.channel + "_max")
			if err != nil {
				errs = append(errs, fmt.Errorf("card %d: %w", c.number, err))
			}
			sensorOf(&c.static, i).Max = Reading{Value: float64(v) * s.scale, OK: ok}
		}
	}
	c.static.Info = Info{
		CardType:       str(c.dir + "/tt_card_type"),
		Serial:         str(c.dir + "/tt_serial"),
		ASICID:         str(c.dir + "/tt_asic_id"),
		FirmwareBundle: str(c.dir + "/tt_fw_bundle_ver"),
		M3AppFirmware:  str(c.dir + "/tt_m3app_fw_ver"),
	}
	return errs
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

// absent reports the errors that mean "the firmware does not report this":
// no such file, no such device (an attribute of a device going away), and
// the hwmon core's "not supported" and "no data".
func absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV) || errors.Is(err, syscall.ENXIO) ||
		errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENODATA)
}

// openAttr opens a sysfs attribute; -1 with no error when it is absent.
func openAttr(path string) (int, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
		switch {
		case err == unix.EINTR:
			continue
		case err == nil:
			return fd, nil
		case absent(err):
			return -1, nil
		}
		return -1, &fs.PathError{Op: "open", Path: path, Err: err}
	}
}

// pread reads an attribute through its open descriptor from offset 0,
// which makes sysfs produce the value afresh (as after a poll, the sysfs
// documentation's seek-and-re-read). ok is false, with no error, when the
// attribute is gone (ENODEV: its device was unregistered) or reads empty.
func (r *Reader) pread(fd int, path string) (b []byte, ok bool, err error) {
	for {
		n, err := unix.Pread(fd, r.buf[:], 0)
		switch {
		case err == unix.EINTR:
			continue
		case err == nil && n == 0:
			// An attribute always holds a value: nothing at all is a
			// device gone away, like ENODEV.
			return nil, false, nil
		case err == nil:
			return trimSpace(r.buf[:n]), true, nil
		case absent(err):
			return nil, false, nil
		}
		return nil, false, &fs.PathError{Op: "read", Path: path, Err: err}
	}
}

// readDynamic reads attribute i of the card through its held descriptor.
// An attribute found gone is closed, and a hwmon one has the card look
// for its hwmon directory afresh next time.
func (r *Reader) readDynamic(c *cardState, i int) (int64, bool, error) {
	fd := c.fds[i]
	if fd < 0 {
		return 0, false, nil
	}
	b, ok, err := r.pread(fd, c.paths[i])
	if err != nil {
		return 0, false, err
	}
	if !ok {
		c.closeFDs(i, i+1)
		if i < len(sensors) {
			// The hwmon directory went away (a reset, the driver
			// unregistering it): its sensors are absent from now on,
			// and it is looked for afresh at the next read.
			r.dropHwmon(c)
		}
		return 0, false, nil
	}
	v, perr := parseInt(b)
	if perr != nil {
		return 0, false, fmt.Errorf("%s: %q is not a decimal number", c.paths[i], b)
	}
	return v, true, nil
}

// dropHwmon forgets a card's vanished hwmon directory: its descriptors are
// closed, its static values cleared, and the directory is looked for again
// at the next read.
func (r *Reader) dropHwmon(c *cardState) {
	c.closeFDs(0, len(sensors))
	c.hwmon, c.staticDue = "", true
	for i := range c.paths[:len(sensors)] {
		c.paths[i] = ""
	}
	c.static.Arch = ""
	for i := range sensors {
		*sensorOf(&c.static, i) = Sensor{}
	}
}

// readRaw reads the first bytes of a sysfs attribute into r.buf by path
// (an attribute is one value and a newline), for those read only now and
// then. ok is false, with no error, when the attribute is absent.
func (r *Reader) readRaw(path string) (b []byte, ok bool, err error) {
	fd, err := openAttr(path)
	if fd < 0 {
		return nil, false, err
	}
	defer unix.Close(fd)
	return r.pread(fd, path)
}

// readInt reads a decimal integer attribute.
func (r *Reader) readInt(path string) (int64, bool, error) {
	b, ok, err := r.readRaw(path)
	if !ok || err != nil {
		return 0, false, err
	}
	v, perr := parseInt(b)
	if perr != nil {
		return 0, false, fmt.Errorf("%s: %q is not a decimal number", path, b)
	}
	return v, true, nil
}

// readString reads a string attribute, kept to printable ASCII and
// maxString bytes, since it becomes a label value.
func (r *Reader) readString(path string) (string, bool, error) {
	b, ok, err := r.readRaw(path)
	if !ok || err != nil {
		return "", false, err
	}
	out := make([]byte, 0, min(len(b), maxString))
	for _, c := range b {
		if len(out) == maxString {
			break
		}
		if c >= 0x20 && c <= 0x7e {
			out = append(out, c)
		}
	}
	return string(out), true, nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ' || b[len(b)-1] == 0) {
		b = b[:len(b)-1]
	}
	for len(b) > 0 && b[0] == ' ' {
		b = b[1:]
	}
	return b
}

var errNotNumber = errors.New("not a decimal number")

// parseInt parses an optionally negative decimal integer without
// allocating.
func parseInt(b []byte) (int64, error) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg, b = true, b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, errNotNumber
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, errNotNumber
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, nil
}
