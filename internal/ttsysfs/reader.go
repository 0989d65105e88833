package ttsysfs

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	// Workers is how many cards are read at once, each read being a few
	// system calls that wait on the driver; default GOMAXPROCS, at most
	// maxWorkers.
	Workers int
}

// maxWorkers bounds the default Options.Workers.
const maxWorkers = 4

// minPerWorker is the fewest cards worth handing to a worker of their
// own: a goroutine costs about what reading one card does.
const minPerWorker = 4

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

// Indexes of the attributes a card's descriptors are held for: those read
// every time (the hwmon inputs, in the order of sensors, then the class
// directory's), then those read with the static ones (the hwmon limits,
// then the identity).
const (
	dynAIClock = len(sensors) + iota
	dynAXIClock
	dynARCClock
	dynHeartbeat
	dynThermalTrips
	nDynamic
)

const (
	staticMax  = nDynamic                 // the limits, in the order of sensors
	staticInfo = staticMax + len(sensors) // the identity, in the order of classStatic
	nAttrs     = staticInfo + len(classStatic)
)

// classDynamic are the class directory's attributes read every time, from
// dynAIClock on.
var classDynamic = [...]string{"tt_aiclk", "tt_axiclk", "tt_arcclk", "tt_heartbeat", "tt_therm_trip_count"}

// classStatic are the class directory's identity attributes, from
// staticInfo on, in the order of Info's fields.
var classStatic = [...]string{"tt_card_type", "tt_serial", "tt_asic_id", "tt_fw_bundle_ver", "tt_m3app_fw_ver"}

// Reader reads every card's attributes, a few cards at once. It is not
// safe for concurrent use.
type Reader struct {
	root        string
	class       string
	staticEvery uint64

	reads   uint64
	cards   map[int]*cardState
	workers []*worker
	// Scratch reused from read to read.
	numbers []int
	states  []*cardState
	results []cardResult
}

// worker reads cards, one at a time; the reader runs a few at once.
type worker struct {
	class       string
	staticEvery uint64
	reads       uint64 // the Reader's, as of this read
	buf         [128]byte
}

// cardResult is what reading one card gave.
type cardResult struct {
	card *Card
	errs []error
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
	paths     [nAttrs]string
	// fds holds each attribute read every time open, -1 for one that is
	// absent (looked for again with the static attributes).
	fds [nAttrs]int
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
	r := &Reader{
		root:        root,
		class:       filepath.Join(root, classDir),
		staticEvery: uint64(every),
		cards:       make(map[int]*cardState),
	}
	workers := cmp.Or(opts.Workers, min(runtime.GOMAXPROCS(0), maxWorkers))
	for range max(workers, 1) {
		r.workers = append(r.workers, &worker{class: r.class, staticEvery: r.staticEvery})
	}
	return r
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
	r.states = r.states[:0]
	for _, n := range numbers {
		c := r.cards[n]
		if c == nil {
			c = newCardState(n)
			r.cards[n] = c
		}
		c.seen = r.reads
		r.states = append(r.states, c)
	}
	r.results = slices.Grow(r.results[:0], len(r.states))[:len(r.states)]
	r.readAll()
	for i := range r.results {
		res := &r.results[i]
		errs = append(errs, res.errs...)
		if res.card != nil {
			into = append(into, *res.card)
		}
		*res = cardResult{}
	}
	for n, c := range r.cards {
		if c.seen != r.reads {
			c.closeFDs(0, nAttrs)
			delete(r.cards, n)
		}
	}
	return into, errs
}

// readAll reads every card of r.states into r.results, spreading them over
// the workers in contiguous runs when there are enough of them.
func (r *Reader) readAll() {
	n := len(r.states)
	workers := min(len(r.workers), max(n/minPerWorker, 1))
	per := (n + workers - 1) / max(workers, 1)
	var wg sync.WaitGroup
	for wi := range workers {
		from, to := wi*per, min((wi+1)*per, n)
		if from >= to {
			break
		}
		w := r.workers[wi]
		w.reads = r.reads
		run := func() {
			for i := from; i < to; i++ {
				card, errs := w.readCard(r.states[i])
				r.results[i] = cardResult{card: card, errs: errs}
			}
		}
		if wi == workers-1 {
			run() // the last run on this goroutine
			continue
		}
		wg.Go(run)
	}
	wg.Wait()
}

// Close closes the descriptors the reader holds. The Reader stays usable:
// the next Read opens them again.
func (r *Reader) Close() error {
	for n, c := range r.cards {
		c.closeFDs(0, nAttrs)
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
func (w *worker) pread(fd int, path string) (b []byte, ok bool, err error) {
	for {
		n, err := unix.Pread(fd, w.buf[:], 0)
		switch {
		case err == unix.EINTR:
			continue
		case err == nil && n == 0:
			// An attribute always holds a value: nothing at all is a
			// device gone away, like ENODEV.
			return nil, false, nil
		case err == nil:
			return trimSpace(w.buf[:n]), true, nil
		case absent(err):
			return nil, false, nil
		}
		return nil, false, &fs.PathError{Op: "read", Path: path, Err: err}
	}
}

// readHeldRaw reads attribute i of the card through its held descriptor.
// An attribute found gone is closed, and a hwmon one has the card look
// for its hwmon directory afresh next time.
func (w *worker) readHeldRaw(c *cardState, i int) ([]byte, bool, error) {
	fd := c.fds[i]
	if fd < 0 {
		return nil, false, nil
	}
	b, ok, err := w.pread(fd, c.paths[i])
	if err != nil {
		return nil, false, err
	}
	if !ok {
		c.closeFDs(i, i+1)
		if i < len(sensors) || (i >= staticMax && i < staticInfo) {
			// The hwmon directory went away (a reset, the driver
			// unregistering it): its sensors are absent from now on,
			// and it is looked for afresh at the next read.
			w.dropHwmon(c)
		}
		return nil, false, nil
	}
	return b, true, nil
}

// readHeld reads a decimal attribute through its held descriptor.
func (w *worker) readHeld(c *cardState, i int) (int64, bool, error) {
	b, ok, err := w.readHeldRaw(c, i)
	if !ok || err != nil {
		return 0, false, err
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
func (w *worker) dropHwmon(c *cardState) {
	c.closeFDs(0, len(sensors))
	c.closeFDs(staticMax, staticInfo)
	c.hwmon, c.staticDue = "", true
	for i := range sensors {
		c.paths[i], c.paths[staticMax+i] = "", ""
	}
	c.static.Arch = ""
	for i := range sensors {
		*sensorOf(&c.static, i) = Sensor{}
	}
}

// readRaw reads the first bytes of a sysfs attribute into r.buf by path
// (an attribute is one value and a newline), for those read only now and
// then. ok is false, with no error, when the attribute is absent.
func (w *worker) readRaw(path string) (b []byte, ok bool, err error) {
	fd, err := openAttr(path)
	if fd < 0 {
		return nil, false, err
	}
	defer unix.Close(fd)
	return w.pread(fd, path)
}

// readString reads a string attribute, kept to printable ASCII and
// maxString bytes, since it becomes a label value.
func (w *worker) readString(path string) (string, bool, error) {
	b, ok, err := w.readRaw(path)
	if !ok || err != nil {
		return "", false, err
	}
	return labelValue(b), true, nil
}

// labelValue keeps a string attribute to printable ASCII and maxString
// bytes, since it becomes a label value.
func labelValue(b []byte) string {
	out := make([]byte, 0, min(len(b), maxString))
	for _, c := range b {
		if len(out) == maxString {
			break
		}
		if c >= 0x20 && c <= 0x7e {
			out = append(out, c)
		}
	}
	return string(out)
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
