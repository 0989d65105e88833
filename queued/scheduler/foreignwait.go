package scheduler

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"slices"
	"strconv"
	"time"

	"github.com/ttkit/ttkit/internal/procscan"
	"github.com/ttkit/ttkit/queued/runner"
)

// Never reset under someone else. Before its first rung, a reset waits
// while a process outside the queue holds its card (the driver's pids
// file, read as holders.go reads it) and belongs to someone the reset was
// not asked by:
//
//   - a process proven to be a running queued job's (jobproof.go) is never
//     waited for: the queue owns it (a job on the card itself was
//     interrupted, or waited for, before the reset started);
//   - a user's reset does not wait for that user's own processes: they
//     are theirs to end, and the user asked;
//   - an automatic recovery, asked by no one, waits for every process
//     outside the queue, queued's own user's too (on a user-mode daemon
//     every process is that user's: a tt-smi they run by hand, a
//     notebook); a user who joins it with their own reset lifts the wait
//     for their processes;
//   - a process whose owner cannot be read, and a holder scan that could
//     not complete, count as held;
//   - a forced reset (reset --force: an admin, or the one user of a user
//     daemon) does not wait, and its log says who forced it and under
//     which process.
//
// While it waits, the card's status and the reset's log say so:
// "recovery waiting: card 1 held by pid 4242 (alice: python3 train.py)".

// resetAsk is who asked for a pending reset, for its wait.
type resetAsk struct {
	uids   []uint32 // users whose own processes do not hold it back
	forced string   // who forced it, "" when nobody did
}

// askLocked adds req's asker to reset job j's askers; s.mu held.
func askLocked(j *job, req *ResetRequest) {
	if j.ask == nil {
		j.ask = &resetAsk{}
	}
	if req.Automatic {
		return
	}
	uid := uint32(os.Getuid())
	if req.OwnerUID != nil {
		uid = *req.OwnerUID
	}
	if !slices.Contains(j.ask.uids, uid) {
		j.ask.uids = append(j.ask.uids, uid)
	}
	if req.Force && j.ask.forced == "" {
		j.ask.forced = req.Owner
		if j.ask.forced == "" {
			j.ask.forced = "the daemon's user"
		}
	}
}

// askOfLocked is who asked for reset job j: as recorded, or, for a reset
// taken up again after a restart, its recorded owner; s.mu held.
func askOfLocked(j *job) resetAsk {
	if j.ask == nil {
		req := ResetRequest{OwnerUID: j.rec.OwnerUID, Automatic: j.rec.Owner == AutoRecoveryOwner}
		askLocked(j, &req)
	}
	return resetAsk{uids: slices.Clone(j.ask.uids), forced: j.ask.forced}
}

// foreignWait is a reset's wait for its card to be free of someone
// else's process.
type foreignWait struct{ *core }

// wait returns once nothing holds the reset back, or false when a service
// stop ended the wait (the reset runs again after the restart). It looks
// every ForeignRecheck.
func (w foreignWait) wait(card int, j *job, log *runner.Log) bool {
	shown := ""
	defer w.show(card, "")
	for {
		w.mu.Lock()
		ask := askOfLocked(j)
		running := runningOf(w.core)
		w.mu.Unlock()
		held, unsure := w.heldBy(card, j.rec.ID, ask.uids, running)
		switch {
		case held == "":
			if shown != "" {
				fmt.Fprintf(log, "== card %d is no longer held: the recovery goes on\n", card)
			}
			return true
		case ask.forced != "":
			fmt.Fprintf(log, "== forced by %s: the recovery goes on under %s\n", ask.forced, held)
			w.log.Warn("forced reset: the recovery goes on under a process of someone else", "card", card, "reset", j.rec.ID, "forced_by", ask.forced, "holder", held)
			return true
		}
		msg := fmt.Sprintf("recovery waiting: card %d held by %s", card, held)
		if unsure {
			msg = fmt.Sprintf("recovery waiting: card %d may be held: %s", card, held)
		}
		if msg != shown {
			fmt.Fprintf(log, "== %s\n", msg)
			w.log.Warn(msg, "card", card, "reset", j.rec.ID)
			w.show(card, msg)
			shown = msg
		}
		t := time.NewTimer(w.opt.ForeignRecheck)
		select {
		case <-j.stop:
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// show puts msg in card's status ("" clears it).
func (w foreignWait) show(card int, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.cards[card]; c.heldBy != msg {
		c.heldBy = msg
		w.changes.bump()
	}
}

// heldBy scans afresh and names the first process that holds the reset
// back ("pid 4242 (alice: python3 train.py)"), or "" when none does;
// unsure when the scan could not complete, and held then says why.
func (w foreignWait) heldBy(card int, own string, excused []uint32, running []ownJob) (held string, unsure bool) {
	scan := w.holders.get(0)
	hs, problem := w.holders.foreignOf(scan, card, own, running)
	if problem == "" && problemAll(scan) {
		problem = errors.Join(scan.Errors...).Error()
	}
	if problem != "" {
		return "its holder scan could not complete (" + problem + ")", true
	}
	for _, h := range hs {
		if h.JobID != "" {
			continue // a running queued job's, of another card
		}
		if h.PID == 0 {
			return "a process outside this PID namespace", false
		}
		l, err := procscan.ReadLineage(w.opt.ProcRoot, h.PID)
		if errors.Is(err, fs.ErrNotExist) {
			continue // gone since the scan
		}
		what := h.CommandLine
		if what == "" {
			what = h.FriendlyName
		}
		if err != nil {
			return fmt.Sprintf("pid %d (owner unknown: %s)", h.PID, what), false
		}
		if slices.Contains(excused, l.UID) {
			continue
		}
		return fmt.Sprintf("pid %d (%s: %s)", h.PID, uidName(l.UID), what), false
	}
	return "", false
}

// problemAll reports whether the scan failed as a whole (the driver's
// directory could not be listed), rather than on one device.
func problemAll(res procscan.Result) bool {
	for _, err := range res.Errors {
		var de *procscan.DeviceError
		if !errors.As(err, &de) {
			return true
		}
	}
	return false
}

// uidName is the user name of uid, or the number when the user database
// has none.
func uidName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil && u.Username != "" {
		return u.Username
	}
	return id
}
