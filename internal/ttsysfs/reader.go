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
