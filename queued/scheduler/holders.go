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
	// JobID is the TT_QUEUE_JOB_ID in its environment, if any: a job of
	// another card's queue, or a leftover of a finished job.
	JobID string
}

// Who counts as the card's own: a holder whose process group is the
// process group of the job (or reset command) running on the card now, or
// whose environment carries that job's TT_QUEUE_JOB_ID (a child that left
// the group). Everything else holding the card is foreign, including a
// job of another card's queue: cooperative serialization is per card, so
// that job bypasses this card's queue.

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

// ownJob identifies the job running on a card, whose processes are not
// foreign.
type ownJob struct {
	id   string
	pgid int
}

// foreignOf lists the foreign holders of card in res and, when the scan
// could not read the card's holders, why.
func (h *holderWatch) foreignOf(res procscan.Result, card int, own ownJob) ([]Holder, string) {
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
	for _, p := range res.Processes {
		if !slices.Contains(p.Devices, card) {
			continue
		}
		if own.pgid > 0 {
			if g, err := runner.ProcessGroup(h.core.opt.ProcRoot, p.PID); err == nil && g == own.pgid {
				continue
			}
		}
		jobID, _ := runner.JobIDOf(h.core.opt.ProcRoot, p.PID) // unreadable: another user's process, foreign
		if own.id != "" && jobID == own.id {
			continue
		}
		hs = append(hs, Holder{PID: p.PID, FriendlyName: p.Identity.FriendlyName, CommandLine: p.Identity.CommandLine, JobID: jobID})
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
	head := c.queue[0]
	if !head.durable || head.rec.Kind == store.KindReset {
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
		hs, _ := h.foreignOf(scan, card, ownJob{})
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
