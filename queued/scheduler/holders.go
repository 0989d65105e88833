package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ttkit/ttkit/internal/procscan"
	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
)

// Holder is a process holding a card's device that is not the job running
// on that card's queue: it bypassed the queue, was queued for another
// card, or outlived its job.
type Holder struct {
	PID          int
	FriendlyName string
	CommandLine  string
	// JobID is the running job of another card's queue the process was
	// proven to belong to (see jobproof.go: its cgroup, or its session or
	// parent chain and its user), "" when it belongs to none.
	JobID string
	// ClaimedJobID is the TT_QUEUE_JOB_ID in its environment when that is
	// not JobID: a leftover of a finished job, a job's process that left
	// the job's session and was handed to init, or a forgery. It is only
	// what the process says; it is shown, never believed.
	ClaimedJobID string
}

// Who counts as the card's own: a holder proven (see jobproof.go) to be a
// process of the job (or reset command) running on the card now.
// Everything else holding the card is foreign, including a job of another
// card's queue (cooperative serialization is per card, so that job
// bypasses this card's queue) and any process that merely carries the
// card's job's TT_QUEUE_JOB_ID.

// holderWatch tells each card's foreign holders from its own: it owns the
// one procscan.Scanner and caches its last result, so frequent /status
// calls cost one scan a second at most, and it decides whether a card must
// wait for a foreign holder (WaitForeign).
type holderWatch struct {
	core   *core
	mu     sync.Mutex
	sc     *procscan.Scanner
	at     time.Time // when res was read (wall clock; the scheduler's clock may be a test's)
	res    procscan.Result
	closed bool
}

func newHolderWatch(c *core) *holderWatch {
	return &holderWatch{core: c, sc: procscan.New(procscan.Options{DriverPath: c.opt.DriverPath, ProcPath: c.opt.ProcRoot})}
}

// get returns a scan no older than maxAge (0: a fresh one).
func (h *holderWatch) get(maxAge time.Duration) procscan.Result {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return procscan.Result{Complete: true}
	}
	if maxAge <= 0 || h.at.IsZero() || time.Since(h.at) > maxAge {
		h.res = h.sc.Scan()
		h.at = time.Now()
	}
	return h.res
}

// close releases the scanner's descriptors; later scans report nothing.
func (h *holderWatch) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	h.sc.Close()
}

// foreignOf lists the foreign holders of card in res and, when the scan
// could not read the card's holders, why. own is the card's running job
// ("" for none), running every job running now, of any card.
func (h *holderWatch) foreignOf(res procscan.Result, card int, own string, running []ownJob) ([]Holder, string) {
	var hs []Holder
	var problems []string
	for _, err := range res.Errors {
		var de *procscan.DeviceError
		if errors.As(err, &de) && de.Device != card {
			continue
		}
		problems = append(problems, err.Error())
	}
	for _, d := range res.Devices {
		if d.Number == card && d.Foreign {
			hs = append(hs, Holder{FriendlyName: "(outside this PID namespace)"})
		}
	}
	var pr *prover
	for _, p := range res.Processes {
		if !slices.Contains(p.Devices, card) {
			continue
		}
		if pr == nil {
			pr = newProver(h.core.opt.ProcRoot, running)
		}
		hd := Holder{PID: p.PID, FriendlyName: p.Identity.FriendlyName, CommandLine: p.Identity.CommandLine}
		if o := pr.ownerOf(p.PID); o != nil {
			if o.id == own {
				continue
			}
			hd.JobID = o.id
		}
		// Unreadable (another user's process, to a user-mode daemon): none
		// shown; nor is anything that is not a job id.
		if claimed, _ := runner.JobIDOf(h.core.opt.ProcRoot, p.PID); claimed != hd.JobID && store.ValidID(claimed) {
			hd.ClaimedJobID = claimed
		}
		hs = append(hs, hd)
	}
	return hs, strings.Join(problems, "; ")
}

// gateLocked returns the cards the worker must look at for foreign
// holders before it dispatches, or nil: WaitForeign is set and the head of
// the queue is a job (or hold) that could start now; for one of several
// cards, all of them. Resets never wait.
func (h *holderWatch) gateLocked(c *card) []int {
	s := h.core
	if !s.opt.WaitForeign || s.stopping || s.persist.err != nil || c.current != nil || c.dead != nil || len(c.queue) == 0 {
		return nil
	}
	head := c.head()
	if head == nil || !head.durable || head.rec.Kind == store.KindReset {
		return nil
	}
	return head.rec.Cards()
}

// pause scans afresh and says why the next job on cards must not start,
// or "" when no foreign process holds any of them. An unreadable pids
// file does not pause a card: the scan shows the error instead, and a
// broken driver file must not stop the queue for good.
func (h *holderWatch) pause(cards []int) string {
	scan := h.get(0)
	for _, card := range cards {
		hs, _ := h.foreignOf(scan, card, "", nil)
		if len(hs) == 0 {
			continue
		}
		why := "foreign holder " + describeHolder(hs[0])
		if len(cards) > 1 {
			why += fmt.Sprintf(" on card %d", card)
		}
		if len(hs) > 1 {
			why += fmt.Sprintf(" and %d more", len(hs)-1)
		}
		return why
	}
	return ""
}

func describeHolder(h Holder) string {
	if h.PID == 0 {
		return "outside this PID namespace"
	}
	return fmt.Sprintf("pid %d (%s)", h.PID, h.FriendlyName)
}
