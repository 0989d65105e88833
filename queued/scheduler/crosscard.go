package scheduler

import (
	"fmt"
	"slices"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/store"
)

// Cross-card holders. tt-umd opens every card it can see unless
// TT_VISIBLE_DEVICES restricts it, so a tt-metal job queued on card 1
// also opens card 0, and two such jobs on different cards hang each other.
// crossWatch looks, while jobs run, at which cards each running job's
// processes hold (by the KMD's pids files, as for foreign holders), and a
// job seen on a card outside its own is shown as such: in status, in its
// record and in a metric, logged once; with CrossCardKill it is also
// ended.

// CrossCard is a running job seen holding a card outside its own.
type CrossCard struct {
	JobID string
	// JobCards are the job's own cards, as written.
	JobCards string
	// Card is the card it opened.
	Card int
	// Cover is every card the job should have been queued for: its own
	// and each other it was seen holding, ascending.
	Cover []int
}

// Advice is the status line for it: what happened and what to do.
func (x CrossCard) Advice() string {
	return fmt.Sprintf("job %s on card %s also opened card %d: tt-metal opens every card it sees; queue it with --device %s or pass TT_VISIBLE_DEVICES",
		short(x.JobID), x.JobCards, x.Card, api.FormatDevices(x.Cover))
}

// crossCardOf is job record rec's CrossCard for card.
func crossCardOf(rec *store.Job, card int) CrossCard {
	cover := slices.Concat(rec.Cards(), rec.CrossCards)
	slices.Sort(cover)
	return CrossCard{JobID: rec.ID, JobCards: rec.DeviceText(), Card: card, Cover: slices.Compact(cover)}
}

// Cross-card policies (TT_DEVICE_CROSS_CARD).
const (
	CrossCardWarn = "warn"
	CrossCardKill = "kill"
)

// crossWatch is the cross-card part: its loop and what it found.
type crossWatch struct {
	*core
}

// loop scans every CrossCardInterval while any job runs.
func (w crossWatch) loop() {
	defer w.loops.Done()
	t := time.NewTicker(w.opt.CrossCardInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			w.check()
		case <-w.quit:
			return
		}
	}
}

// check scans once and records what it finds: a card held by a process
// proven (see jobproof.go) to be a running job's, outside that job's
// cards. A process merely carrying a job's TT_QUEUE_JOB_ID is no evidence.
func (w crossWatch) check() {
	w.mu.Lock()
	var jobs []ownJob
	type running struct {
		j     *job
		cards []int
	}
	byID := map[string]running{}
	for _, o := range runningOf(w.core) {
		if j := w.jobs[o.id]; j != nil && o.kind == store.KindJob {
			jobs = append(jobs, o)
			byID[o.id] = running{j, j.rec.Cards()}
		}
	}
	w.mu.Unlock()
	if len(jobs) == 0 {
		return
	}
	scan := w.holders.get(w.opt.HolderMaxAge)
	pr := newProver(w.opt.ProcRoot, jobs)
	for _, p := range scan.Processes {
		owner := pr.ownerOf(p.PID)
		if owner == nil {
			continue
		}
		r := byID[owner.id]
		for _, d := range p.Devices {
			if !slices.Contains(r.cards, d) {
				w.found(r.j, d, p.PID)
			}
		}
	}
}

// found records that job j's process pid holds card d, once per card.
func (w crossWatch) found(j *job, d, pid int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if j.rec.State != store.StateRunning || slices.Contains(j.rec.CrossCards, d) {
		return
	}
	j.rec.CrossCards = append(j.rec.CrossCards, d)
	slices.Sort(j.rec.CrossCards)
	x := crossCardOf(&j.rec, d)
	w.log.Warn(x.Advice(), "job", j.rec.ID, "pid", pid, "card", d, "policy", w.opt.CrossCard)
	w.met.crossCard(d)
	if w.opt.CrossCard == CrossCardKill {
		j.crossKill = fmt.Sprintf("killed: it opened card %d outside its own (TT_DEVICE_CROSS_CARD=kill); queue it with --device %s or pass TT_VISIBLE_DEVICES",
			d, api.FormatDevices(x.Cover))
		j.stopFor(stopKill)
	}
	w.notify(j)
}

// crossCardsLocked lists, for status, the running jobs seen on card id
// though it is not theirs.
func (s *core) crossCardsLocked(id int) []CrossCard {
	var out []CrossCard
	seen := map[*job]bool{}
	for _, cid := range s.order {
		j := s.cards[cid].current
		if j == nil || seen[j] || !slices.Contains(j.rec.CrossCards, id) {
			continue
		}
		seen[j] = true
		out = append(out, crossCardOf(&j.rec, id))
	}
	return out
}
