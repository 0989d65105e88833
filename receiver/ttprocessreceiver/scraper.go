package ttprocessreceiver // import "github.com/ttkit/ttkit/receiver/ttprocessreceiver"

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper/scrapererror"
	"go.uber.org/zap"

	"github.com/ttkit/ttkit/internal/procscan"
	"github.com/ttkit/ttkit/receiver/ttprocessreceiver/internal/metadata"
)

// privateNamespaceRemedy is appended to every warning about a collector that
// cannot see the host's PIDs: it is the only fix, so say it where it is read.
const privateNamespaceRemedy = "the collector runs in a private PID namespace and cannot name processes on this host; " +
	"share the host PID namespace (Kubernetes: hostPID: true, the chart's daemonset.hostPID; Docker: --pid=host)"

// series is one live tt_process series. Its labels are fixed when the
// process is first seen: a Prometheus label set is immutable, and the seed
// requires the friendly name and command line to describe the same read.
// The one exception is a provisional series (see provisional).
type series struct {
	pid          int
	startTime    uint64
	pidLabel     string
	friendlyName string
	commandLine  string
	// provisional is set when the process had no command line when first
	// seen, or its identity read had not returned in time (it is then
	// named after its PID). A holder of a device is past its execve, so an
	// empty command line was a scan racing the exec (or a zombie). Once a
	// real identity arrives, the series is ended and started again under
	// the real name.
	provisional bool
	seen        uint64 // the scan generation that last listed this PID
	// attr is the holder's attribution, read with its identity; labels
	// are the tt_process label options it gives, built once. pod and
	// container, when set, put the series under a resource of its own.
	attr           procscan.Attribution
	labels         []metadata.MetricAttributeOption
	pod, container string
	ownResource    bool
}

// sameLabels reports whether two series carry the same label set, so that
// one is, for Prometheus, the continuation of the other.
func sameLabels(a, b *series) bool {
	return a.friendlyName == b.friendlyName && a.commandLine == b.commandLine && a.attr == b.attr
}

// ttScraper turns procscan results into tt_process gauges. It remembers the
// live series between cycles so it can keep labels stable, retire a series
// with a staleness point when its process is gone, and hold everything when
// a scan is incomplete.
type ttScraper struct {
	cfg      *Config
	settings receiver.Settings
	logger   *zap.Logger

	hostname string
	mb       *metadata.MetricsBuilder
	scanner  *procscan.Scanner
	now      func() time.Time
	selfPID  int // the collector's own PID, excluded from every scan
	// countOnly is set when proc_path is of another PID namespace: no
	// process is named, only counted.
	countOnly bool
	// countOnlyHeld is the holder count a count-only scraper reports while
	// a scan is incomplete.
	countOnlyHeld int

	generation uint64
	series     map[int]*series
	live       []*series // scratch, sorted by PID each cycle
	// ending holds the series whose process is gone, each with the cycles
	// left in which its staleness point is sent again.
	ending []ending
	// devices is what is known of each device; endedDevices names the
	// devices whose series end this cycle (scratch).
	devices         map[int]*deviceState
	endedDevices    []string
	registered      bool // counted in hostnames
	warnedOnlyNS    bool
	warnedNoDevices bool
}

func newScraper(cfg *Config, set receiver.Settings) *ttScraper {
	return &ttScraper{
		cfg:      cfg,
		settings: set,
		logger:   set.Logger,
		mb:       metadata.NewMetricsBuilder(cfg.MetricsBuilderConfig, set),
		now:      time.Now,
		selfPID:  os.Getpid(),
		series:   make(map[int]*series),
		devices:  make(map[int]*deviceState),
	}
}

// resolveHostname is the hostname setting, or the OS host name when it is
// empty.
func resolveHostname(cfg *Config) (string, error) {
	if cfg.Hostname != "" {
		return cfg.Hostname, nil
	}
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("hostname is not set and the OS host name cannot be read: %w", err)
	}
	return h, nil
}

func (s *ttScraper) start(context.Context, component.Host) error {
	hostname, err := resolveHostname(s.cfg)
	if err != nil {
		return err
	}
	s.hostname = hostname
	redactions, err := compileRedactions(s.cfg.CommandLineRedact)
	if err != nil {
		return err
	}
	s.registered = true
	if others := hostnames.claim(s.hostname); others > 0 {
		s.logger.Warn("Another ttprocess receiver in this collector reports the same hostname: their "+
			"tt_process_count and tt_device_process_count series are the same and overwrite each other. "+
			"Give each receiver its own hostname setting",
			zap.String("hostname", s.hostname), zap.String("driver_path", s.cfg.DriverPath))
	}
	self := s.selfPID
	if err := procscan.CheckPIDNamespace(s.cfg.ProcPath, self); err != nil {
		// Reading it would attach unrelated processes' command lines to
		// the PIDs the driver lists: name nothing, count only.
		s.countOnly = true
		s.logger.Error("proc_path is not this collector's PID namespace's procfs, so tt_process names no process "+
			"(tt_process_count and tt_device_process_count are still exact): "+err.Error()+". "+
			"Fix the deployment: set proc_path to /proc, and to see the host's processes share the host PID namespace "+
			"(Kubernetes: hostPID: true, the chart's daemonset.hostPID; Docker: --pid=host); a host procfs mounted "+
			"elsewhere does not help, because the driver renders its PIDs in the collector's namespace",
			zap.String("proc_path", s.cfg.ProcPath), zap.Int("pid", self))
	}
	s.scanner = procscan.New(procscan.Options{
		CountOnly:  s.countOnly,
		DriverPath: s.cfg.DriverPath,
		ProcPath:   s.cfg.ProcPath,
		SelfPID:    self,
		Redact:     redactor(redactions),
		// Whose each holder is, read with its identity.
		Attribution: s.cfg.Attribution.scanOptions(cmp.Or(s.cfg.cgroupPath, defaultCgroupPath)),
		// Half the scrape's time for identity reads, so that a scan
		// waiting on a stuck read still ends inside the scrape.
		ReadTimeout: s.cfg.scrapeTimeout() / 2,
	})
	s.logger.Info("Excluding the collector's own PID from tt_process", zap.Int("pid", self),
		zap.String("driver_path", s.cfg.DriverPath), zap.String("hostname", s.hostname))
	if self == 1 {
		s.logger.Warn("The collector's own PID is 1: " + privateNamespaceRemedy)
	}
	return nil
}

func (s *ttScraper) shutdown(context.Context) error {
	if s.registered {
		s.registered = false
		hostnames.release(s.hostname)
	}
	if s.scanner == nil {
		return nil
	}
	return s.scanner.Close()
}

// hostnames counts the running ttprocess receivers of this process by the
// hostname they report. Two with one hostname write the same
// tt_process_count{hostname} series, each overwriting the other's value.
var hostnames = hostnameRegistry{n: make(map[string]int)}

type hostnameRegistry struct {
	mu sync.Mutex
	n  map[string]int
}

// claim registers one more receiver reporting hostname and returns how many
// already did.
func (r *hostnameRegistry) claim(hostname string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[hostname]++
	return r.n[hostname] - 1
}

func (r *hostnameRegistry) release(hostname string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n[hostname]--; r.n[hostname] <= 0 {
		delete(r.n, hostname)
	}
}

// redactor replaces, for every expression in order, each match with
// procscan.RedactedMark, or, when the expression has capturing groups, only
// the text of each group that took part in the match: so
// --password[= ](\S+) keeps the option's name and hides its value.
func redactor(res []*regexp.Regexp) func(string) string {
	if len(res) == 0 {
		return nil
	}
	return func(cmdline string) string {
		for _, re := range res {
			cmdline = redactOne(re, cmdline)
		}
		return cmdline
	}
}

func redactOne(re *regexp.Regexp, s string) string {
	if re.NumSubexp() == 0 {
		return re.ReplaceAllLiteralString(s, procscan.RedactedMark)
	}
	var b strings.Builder
	last := 0
	for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
		for g := 2; g+1 < len(m); g += 2 {
			if from, to := m[g], m[g+1]; from >= last && to > from {
				b.WriteString(s[last:from])
				b.WriteString(procscan.RedactedMark)
				last = to
			}
		}
	}
	b.WriteString(s[last:])
	return b.String()
}

func (s *ttScraper) scrape(ctx context.Context) (pmetric.Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.scrapeTimeout())
	defer cancel()
	now := pcommon.NewTimestampFromTime(s.now())
	res := s.scanner.ScanContext(ctx)
	s.generation++

	named := res.Processes
	if s.countOnly {
		named = nil
	}
	for i := range named {
		p := &named[i]
		cur, ok := s.series[p.PID]
		// A series is only replaced by an identity that proves another
		// process: one with a start time read. The PID fallback of a
		// process that could not be read (it exited while the driver
		// still lists it), or of one still being read whose start time is
		// unknown, proves nothing.
		unverified := p.Identity.Source == procscan.SourcePID && p.Identity.StartTime == 0
		renamed := ok && cur.provisional && !p.Identity.Pending
		if ok && !cur.provisional && unverified {
			cur.seen = s.generation
			continue
		}
		if ok && (cur.startTime != p.Identity.StartTime || renamed) {
			// The PID was reused by another process, or a provisionally
			// named process has its real identity now: the old series ends,
			// unless the new one has the very same labels, in which case
			// Prometheus sees one series that simply goes on.
			next := s.newSeries(p)
			if !sameLabels(next, cur) {
				s.retire(cur)
			}
			cur = next
			s.series[p.PID] = cur
		}
		if !ok {
			cur = s.newSeries(p)
			s.series[p.PID] = cur
		}
		cur.seen = s.generation
	}
	if res.Complete {
		for pid, cur := range s.series {
			if cur.seen != s.generation {
				s.retire(cur)
				delete(s.series, pid)
			}
		}
	}

	s.live = s.live[:0]
	for _, cur := range s.series {
		s.live = append(s.live, cur)
	}
	slices.SortFunc(s.live, func(a, b *series) int { return a.pid - b.pid })
	// A holder in a pod or container goes out under a resource of its
	// own, emitted before anything else is recorded: emitting takes every
	// point recorded so far.
	for _, cur := range s.live {
		if cur.ownResource {
			s.recordProcess(now, 1, cur)
			s.emitHolder(cur)
		}
	}
	retired := s.recordEnding(now)
	for _, cur := range s.live {
		if !cur.ownResource {
			s.recordProcess(now, 1, cur)
		}
	}

	foreign := s.recordDevices(now, &res)
	count := len(s.series)
	if s.countOnly {
		// No series to hold: hold the count itself while a scan is
		// incomplete (new holders on the devices read still raise it).
		if res.Complete || len(res.Processes) > s.countOnlyHeld {
			s.countOnlyHeld = len(res.Processes)
		}
		count = s.countOnlyHeld
	}
	if foreign {
		count++
	}
	s.mb.RecordTtProcessCountDataPoint(now, int64(count), s.hostname)
	s.warnIfOnlyForeign(&res)
	s.warnIfNoDevices(&res)

	rb := s.mb.NewResourceBuilder()
	rb.SetHostName(s.hostname)
	md := s.mb.Emit(metadata.WithResource(rb.Emit()))
	if retired > 0 {
		markRetired(md)
	}
	if len(s.endedDevices) > 0 {
		markEndedDevices(md, s.endedDevices)
	}

	var errs scrapererror.ScrapeErrors
	for _, err := range res.Errors {
		errs.AddPartial(1, err)
	}
	return md, errs.Combine()
}

// removalRepeats is how many cycles in a row a removal is sent. The
// staleness point travels once per cycle like any other, and if the
// pipeline refuses that batch (memory_limiter, an exporter error), the dead
// process would stay at 1 in Prometheus for the exporter's five-minute
// expiry; a NoRecordedValue point for a series already gone is harmless.
const removalRepeats = 3

// ending is a series whose process is gone and the cycles its staleness
// point is still to be sent in.
type ending struct {
	s    *series
	left int
}

// retire queues staleness points for a series whose process is gone.
func (s *ttScraper) retire(old *series) {
	s.ending = append(s.ending, ending{s: old, left: removalRepeats})
}

// recordEnding records this cycle's staleness points, value 0, and returns
// how many. A series whose very labels are live again (a PID reused by an
// identical command line) is not ended: the staleness marker would delete
// the live series.
func (s *ttScraper) recordEnding(now pcommon.Timestamp) int {
	relive := func(e ending) bool {
		cur, ok := s.series[e.s.pid]
		return ok && sameLabels(cur, e.s)
	}
	// Holders with a resource of their own first, each emitted at once.
	for _, e := range s.ending {
		if e.s.ownResource && !relive(e) {
			s.recordProcess(now, 0, e.s)
			s.emitHolder(e.s)
		}
	}
	kept := s.ending[:0]
	n := 0
	for _, e := range s.ending {
		if relive(e) {
			continue
		}
		if !e.s.ownResource {
			s.recordProcess(now, 0, e.s)
		}
		n++
		if e.left--; e.left > 0 {
			kept = append(kept, e)
		}
	}
	clear(s.ending[len(kept):])
	s.ending = kept
	return n
}

// warnIfOnlyForeign warns once when every holder the driver lists is outside
// our PID namespace: the telltale of a containerized collector without the
// host PID namespace.
func (s *ttScraper) warnIfOnlyForeign(res *procscan.Result) {
	if s.warnedOnlyNS || !res.Foreign || len(res.Processes) > 0 {
		return
	}
	s.warnedOnlyNS = true
	s.logger.Warn("Every process holding a Tenstorrent device is listed as PID 0: " + privateNamespaceRemedy)
}

// warnIfNoDevices warns once when a complete scan finds no device
// directory: reported as an idle host, but more often a deployment that
// cannot see the driver.
func (s *ttScraper) warnIfNoDevices(res *procscan.Result) {
	if s.warnedNoDevices || !res.Complete || len(res.Devices) > 0 {
		return
	}
	s.warnedNoDevices = true
	state := "empty"
	if _, err := os.Stat(s.cfg.DriverPath); errors.Is(err, fs.ErrNotExist) {
		state = "missing"
	}
	s.logger.Warn("The driver directory is "+state+", so this host reports no device and tt_process_count 0. "+
		"Usually driver_path is wrong, /proc/driver is masked in a container (runtimes mask it by default; "+
		"the chart's privileged pod unmasks it), or no Tenstorrent KMD is loaded (lsmod | grep tenstorrent)",
		zap.String("driver_path", s.cfg.DriverPath))
}

func (s *ttScraper) newSeries(p *procscan.Process) *series {
	cur := &series{
		pid:          p.PID,
		startTime:    p.Identity.StartTime,
		pidLabel:     strconv.Itoa(p.PID),
		friendlyName: p.Identity.FriendlyName,
		commandLine:  p.Identity.CommandLine,
		provisional:  p.Identity.Source == procscan.SourceComm || p.Identity.Pending,
		attr:         p.Identity.Attribution,
	}
	cur.labels = s.cfg.Attribution.labels(cur.attr)
	cur.pod, cur.container, cur.ownResource = s.cfg.Attribution.holderResource(cur.attr)
	return cur
}

// markRetired flags the tt_process points recorded for retired series (the
// only ones with value 0) as NoRecordedValue, so the Prometheus exporter drops
// the series at once and remote write sends a staleness marker, instead of the
// series lingering for the exporter's five-minute expiry.
func markRetired(md pmetric.Metrics) {
	stale := pmetric.DefaultDataPointFlags.WithNoRecordedValue(true)
	forEachPoint(md, "tt_process", func(dp pmetric.NumberDataPoint) {
		if dp.IntValue() == 0 {
			dp.SetFlags(stale)
		}
	})
}
