package scheduler

import (
	"errors"
	"time"

	"fmt"
	"github.com/ttkit/ttkit/internal/ttsysfs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
)

// core is the scheduler's state under its one lock: the cards with their
// FIFO queues and state machines, the jobs in memory and the counts
// Submit checks. Each part of the scheduler holds the core and takes mu
// for what it reads or changes of it; what a part owns alone lives in the
// part. The parts reach each other through the core's fields.
type core struct {
	opt    Options
	st     Store
	log    *slog.Logger
	bootID string

	mu       sync.Mutex
	cards    map[int]*card
	order    []int           // card ids ascending
	jobs     map[string]*job // queued, running, and finished-but-not-yet-forgotten
	after    *afterBook      // which queued jobs wait for which job (after.go)
	queued   int             // jobs in state queued over all cards
	nextSeq  uint64
	stopping bool
	warnings []string  // recovery problems shown in status
	identAt  time.Time // when the cards' identities were last read; see identify

	changes changeFeed // status-page notifications; its own lock
	met     *metrics
	persist *persister    // the persistence failure and its retry; fields under mu
	budget  *outputBudget // its own lock, taken after mu
	holders *holderWatch  // its own lock
	retain  *retention    // fields under mu
	launch  *launcher     // read-only after New
	resets  resetRunner
	fit     *fitness // read-only after New; see fitness.go
	fence   fencer   // read-only after New; see fence.go

	quit    chan struct{} // closed by Stop after the workers are done
	expiry  chan struct{} // a hold with an expiry was queued; see holdDesk.expiryLoop
	workers sync.WaitGroup
	loops   sync.WaitGroup
}

// newCore builds the core and its parts for opt (whose defaults are
// applied) with no job in it yet.
func newCore(opt Options, met *metrics) (*core, error) {
	c := &core{
		opt:    opt,
		st:     opt.Store,
		log:    opt.Logger,
		cards:  map[int]*card{},
		jobs:   map[string]*job{},
		quit:   make(chan struct{}),
		expiry: make(chan struct{}, 1),
		met:    met,
	}
	c.nextSeq = 1
	c.persist = &persister{core: c, failed: make(chan struct{}, 1)}
	c.budget = &outputBudget{core: c}
	c.holders = newHolderWatch(c)
	c.retain = &retention{core: c}
	c.after = &afterBook{core: c, index: map[string][]*job{}}
	c.resets = resetRunner{c}
	var env []string
	for _, kv := range opt.BaseEnv {
		if strings.HasPrefix(kv, runner.JobEnvVar+"=") || strings.HasPrefix(kv, DeviceEnvVar+"=") || strings.HasPrefix(kv, AgentEnvVar+"=") ||
			strings.HasPrefix(kv, api.ArrayIDEnvVar+"=") || strings.HasPrefix(kv, api.ArrayIndexEnvVar+"=") {
			continue
		}
		env = append(env, kv)
	}
	c.launch = &launcher{opt: &c.opt, env: env, ctlEnv: controlEnv(env)}
	if b, err := os.ReadFile(opt.BootIDPath); err == nil {
		c.bootID = strings.TrimSpace(string(b))
	}
	for _, id := range opt.Devices {
		if c.cards[id] != nil {
			c.holders.close()
			return nil, fmt.Errorf("card %d listed twice", id)
		}
		c.cards[id] = newCard(id)
		c.order = append(c.order, id)
	}
	sort.Ints(c.order)
	c.fit = newFitness(c)
	c.fence = fencer{f: opt.Fence, log: opt.Logger}
	if c.bootID == "" {
		c.warnings = append(c.warnings, fmt.Sprintf("cannot read the boot id from %s: a dead card stays dead across reboots", opt.BootIDPath))
	}
	return c, nil
}

// outputPath is where a job's output file lives.
func (c *core) outputPath(id string) string {
	return filepath.Join(c.opt.OutputDir, id+".log")
}

// notify wakes the waiters of job j and the watchers of Changes.
func (c *core) notify(j *job) {
	j.notify()
	c.changes.bump()
}

// settleLocked installs a durable final record and forgets the job.
func (c *core) settleLocked(j *job, rec store.Job) {
	j.rec = rec
	j.held = false
	delete(c.jobs, rec.ID)
	c.notify(j)
	c.after.settledLocked(&j.rec)
}

// wakeAllLocked wakes every card's worker.
func (c *core) wakeAllLocked() {
	for _, id := range c.order {
		c.cards[id].wakeup()
	}
}

// dirtyCardsLocked snapshots the records of every card with changes not
// yet durable, with the revisions they carry.
func (c *core) dirtyCardsLocked() ([]store.Card, []uint64) {
	var recs []store.Card
	var revs []uint64
	for _, id := range c.order {
		if cd := c.cards[id]; cd.dirtyLocked() {
			recs = append(recs, cd.recordLocked())
			revs = append(revs, cd.rev)
		}
	}
	return recs, revs
}

// savedLocked records that card records up to the given revisions are durable.
func (c *core) savedLocked(recs []store.Card, revs []uint64) {
	for i, r := range recs {
		if cd := c.cards[r.ID]; cd != nil && revs[i] > cd.savedRev {
			cd.savedRev = revs[i]
		}
	}
}

// outputEntry is an output file and the job id it is named for.
type outputEntry struct {
	os.DirEntry
	id string
}

// settledOutputs lists the output files of jobs that are not in memory
// (finished and settled, or without a record at all), skipping other
// files. Retention and the output budget both work on these.
func (c *core) settledOutputs() ([]outputEntry, error) {
	entries, err := os.ReadDir(c.opt.OutputDir)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", c.opt.OutputDir, err)
	}
	var out []outputEntry
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || !store.ValidID(id) {
			continue
		}
		c.mu.Lock()
		active := c.jobs[id] != nil
		c.mu.Unlock()
		if !active {
			out = append(out, outputEntry{e, id})
		}
	}
	return out, nil
}

// identityMaxAge is how old a card's identity (PCI address, board) may be
// when status shows it: a re-probe can renumber cards.
const identityMaxAge = 30 * time.Second

// identify reads every card's identity from sysfs when the last read is
// older than identityMaxAge, outside the lock, and keeps it on the card.
func (s *core) identify() {
	s.mu.Lock()
	stale := s.identAt.IsZero() || time.Since(s.identAt) > identityMaxAge
	if stale {
		s.identAt = time.Now()
	}
	ids := append([]int(nil), s.order...)
	s.mu.Unlock()
	if !stale {
		return
	}
	type result struct {
		id  ttsysfs.Identity
		err error
	}
	got := make([]result, len(ids))
	for i, n := range ids {
		got[i].id, got[i].err = ttsysfs.Identify(s.opt.SysfsPath, n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, n := range ids {
		c := s.cards[n]
		c.ident, c.identErr = got[i].id, ""
		if got[i].err != nil && !errors.Is(got[i].err, ttsysfs.ErrNoCard) {
			c.identErr = got[i].err.Error()
		}
	}
}
