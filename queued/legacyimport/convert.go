package legacyimport

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/store"
)

// interruptedError is the error of a job that was running when the Python
// tool stopped: like a job interrupted by a restart of queued, it is never
// run again.
const interruptedError = "interrupted: it was running when the Python tt-device-queue stopped; imported, never run again"

// resetDetail is the detail of a card's last reset carried over.
const resetDetail = "the Python tt-device-queue's last reset of the card, imported"

// resetDir is the working directory of imported resets: root's reset
// command never runs in a directory the database chose.
const resetDir = "/"

// reservedEnv are variables queued sets on every job itself.
var reservedEnv = map[string]bool{"TT_QUEUE_JOB_ID": true, "TT_QUEUE_DEVICE": true}

// converted is the database as store records.
type converted struct {
	jobs       []store.Job
	outputs    map[string]string // new job id -> the old output file to copy
	cards      []store.Card
	report     Report
	renamedIDs map[string]string // old id -> new id, where the old is not a prefix of the new
	// renamed maps a job (its renameKey) to the fresh id merge gave it,
	// the id it would have had being another record's (see merge).
	renamed map[string]string
}

// convertOptions are what convert needs besides the rows.
type convertOptions struct {
	defaultTimeout time.Duration
	now            time.Time
	// ownerUID and owner, in system mode, make every record the
	// database owner's, as a submission over the socket is its caller's.
	ownerUID *uint32
	owner    string
	// bootID is this boot's id: a pending reset of another boot is
	// dropped, as the Python tool drops it (a reboot resets the card).
	bootID string
	// lastWrite is when the database (or its WAL) was last written: the
	// tool, and a job it still had running, were alive then.
	lastWrite time.Time
}

// convert turns the rows into store records, in the order they are to be
// stored: history first (by seq), then each card's pending reset and its
// queued jobs in the order the Python tool would have run them (see
// pythonOrder). Running rows end as interrupted, done rows become
// history. A row it cannot place (an unknown status, a card that is not a
// number) stops the whole import, naming the row.
func convert(l *legacyDB, o convertOptions) (*converted, error) {
	c := &converted{outputs: map[string]string{}, renamedIDs: map[string]string{}, renamed: map[string]string{}}
	c.report.UserVersion = l.userVersion
	c.report.CardColumn = l.cardColumn
	boots := map[int]string{}
	for _, s := range l.states {
		if card, err := cardOf(s, l.cardColumn); err == nil {
			boots[card] = s.str("boot_id")
		}
	}
	var history []store.Job
	queued := map[int][]queuedRow{}
	var slots []int // the card of each queued row, in seq order
	lastReset := map[int]*store.Job{}
	for _, r := range l.jobs {
		j, err := c.job(r, l.cardColumn, o)
		if err != nil {
			return nil, fmt.Errorf("row seq %s (job %s): %w", r.str("seq"), r.str("id"), err)
		}
		if j.Kind == store.KindReset && j.State == store.StateQueued {
			// queued retries a pending reset only on the boot it was asked
			// for; the card state's boot is the best record of that.
			j.BootID = boots[j.Card()]
		}
		if j.State == store.StateQueued {
			queued[j.Card()] = append(queued[j.Card()], queuedRow{job: j, client: r.str("client_id")})
			slots = append(slots, j.Card())
			continue
		}
		if j.Kind == store.KindReset && j.ExitCode != nil && (*j.ExitCode == 0 || *j.ExitCode == 1) {
			if prev := lastReset[j.Card()]; prev == nil || !j.FinishedAt.Before(prev.FinishedAt) {
				jj := j
				lastReset[j.Card()] = &jj
			}
		}
		history = append(history, j)
	}
	for _, s := range l.states {
		card, err := cardOf(s, l.cardColumn)
		if err != nil {
			return nil, fmt.Errorf("device_state row: %w", err)
		}
		rec := store.Card{ID: card, State: store.CardHealthy, ResetEpoch: uint64(max(s.int("reset_epoch"), 0)),
			LastResetAt: unixTime(s, "last_reset_at")}
		if strings.EqualFold(s.str("state"), store.CardDead) {
			rec.State, rec.DeadBootID, rec.DeadReason, rec.DeadSince = store.CardDead, s.str("boot_id"), s.str("dead_reason"), unixTime(s, "dead_since")
			if rec.DeadReason == "" {
				rec.DeadReason = "marked dead by the Python tt-device-queue"
			}
			c.report.DeadCards = append(c.report.DeadCards, card)
		}
		switch last := lastReset[card]; {
		case last != nil:
			rec.LastResetID, rec.LastResetAt, rec.LastResetResult = last.ID, last.FinishedAt, "ok"
			if *last.ExitCode != 0 {
				rec.LastResetResult = "failed"
			}
			rec.LastResetDetail = resetDetail
		case !rec.LastResetAt.IsZero():
			// The reset's own row is gone (pruned): its record is made
			// from the card's, so status and reset JOB can name it.
			j := resetRecord(card, "last reset at "+s.str("last_reset_at"), rec.LastResetAt, o)
			code := 0
			j.State, j.StartedAt, j.FinishedAt, j.ExitCode, j.Outcome = store.StateDone, rec.LastResetAt, rec.LastResetAt, &code, store.OutcomeSuccess
			j.ResetEpoch = rec.ResetEpoch - min(rec.ResetEpoch, 1)
			history = append(history, j)
			rec.LastResetID, rec.LastResetResult, rec.LastResetDetail = j.ID, "ok", resetDetail
		}
		if pending := s.int("reset_pending") != 0 || strings.EqualFold(s.str("state"), "resetting"); pending && rec.State != store.CardDead {
			// The Python tool, restarted on this boot, resets the card
			// before anything else; after a reboot it drops the request.
			if boot := s.str("boot_id"); boot == o.bootID || boot == "" || o.bootID == "" {
				j := resetRecord(card, fmt.Sprintf("pending reset at epoch %d on boot %s", rec.ResetEpoch, boot), unixTime(s, "updated_at"), o)
				j.BootID, j.ResetEpoch = boot, rec.ResetEpoch
				queued[card] = append([]queuedRow{{job: j}}, queued[card]...)
				slots = append([]int{card}, slots...)
				c.report.Queued++
				c.report.Resets++
				c.report.PendingResets = append(c.report.PendingResets, card)
			}
		}
		c.cards = append(c.cards, rec)
	}
	// Each card's queued jobs, in its Python order, take the places its
	// rows had among all queued rows: one client's queue stays exactly in
	// seq order, and cards keep their interleaving.
	c.jobs = history
	ordered := map[int][]store.Job{}
	for card, rows := range queued {
		ordered[card] = pythonOrder(rows)
	}
	for _, card := range slots {
		c.jobs = append(c.jobs, ordered[card][0])
		ordered[card] = ordered[card][1:]
	}
	sort.Slice(c.cards, func(i, k int) bool { return c.cards[i].ID < c.cards[k].ID })
	sort.Ints(c.report.DeadCards)
	return c, nil
}

// queuedRow is a queued job with the client it takes turns as.
type queuedRow struct {
	job    store.Job
	client string
}

// pythonOrder is the order in which the Python tool, restarted, runs one
// card's queued jobs (given in seq order): resets first; then the clients
// take turns, one job each, in the order of their oldest queued job, and
// each client's jobs keep their own order (the tool keeps a queue per
// client_id and a rotation of clients, rebuilt from the queued rows in
// seq order when it starts, and dispatches from the head of the
// rotation, sending a client with more jobs to its back).
func pythonOrder(rows []queuedRow) []store.Job {
	var out []store.Job
	per := map[string][]store.Job{}
	var turn []string
	for _, r := range rows {
		if r.job.Kind == store.KindReset {
			out = append(out, r.job)
			continue
		}
		if _, ok := per[r.client]; !ok {
			turn = append(turn, r.client)
		}
		per[r.client] = append(per[r.client], r.job)
	}
	for len(turn) > 0 {
		client := turn[0]
		turn = turn[1:]
		out = append(out, per[client][0])
		if per[client] = per[client][1:]; len(per[client]) > 0 {
			turn = append(turn, client)
		}
	}
	return out
}

// resetRecord is a reset job of card made by the import (one the
// database implies without a row of its own); key makes its id.
func resetRecord(card int, key string, at time.Time, o convertOptions) store.Job {
	if at.IsZero() {
		at = o.now
	}
	j := store.Job{ID: newID(fmt.Sprintf("card %d %s", card, key)), Kind: store.KindReset, Device: &card,
		Cmd: fmt.Sprintf("reset card %d", card), Cwd: resetDir, Timeout: 0, Repeat: 1,
		State: store.StateQueued, SubmittedAt: at, OwnerUID: o.ownerUID, Owner: o.owner}
	return j
}

// job converts one jobs row, held to queued's record budget.
func (c *converted) job(r row, cardColumn string, o convertOptions) (store.Job, error) {
	j, err := c.row(r, cardColumn, o)
	if err == nil {
		c.fitBudget(&j, o.now)
	}
	return j, err
}

// fitBudget holds j to queued's record budget, which the Python tool did
// not have: a record over it keeps a preview of its cmd and no env, so it
// costs what any record may, and never runs (a queued one fails at once,
// saying why). The whole row stays in the Python tool's database. A
// reset's cmd is only its name (root's command runs), so only cut.
func (c *converted) fitBudget(j *store.Job, now time.Time) {
	envBytes := api.EnvBytes(j.Env)
	size := len(j.Cmd) + envBytes
	if size <= api.MaxRecordBytes && len(j.Cmd) <= api.MaxCmdBytes {
		return
	}
	c.report.OverBudget++
	why := fmt.Sprintf("its cmd (%d bytes) and env (%d bytes) take %d bytes, over queued's record budget of %d bytes (a cmd of at most %d); imported with its cmd cut to %d bytes and no env, the whole row left in the Python tool's database",
		len(j.Cmd), envBytes, size, api.MaxRecordBytes, api.MaxCmdBytes, store.PreviewBytes)
	j.Cmd = strings.Clone(store.Preview(j.Cmd))
	j.Env = nil
	switch {
	case j.Kind == store.KindReset:
	case j.State == store.StateQueued:
		code := -1
		j.State, j.ExitCode, j.Outcome, j.FinishedAt = store.StateDone, &code, store.OutcomeFailure, now
		j.Error = "not run: " + why
		c.report.Queued--
		c.report.Finished++
	case j.Error == "":
		j.Error = why
	default:
		j.Error += "; " + why
	}
}

// row converts one jobs row as it is.
func (c *converted) row(r row, cardColumn string, o convertOptions) (store.Job, error) {
	old := r.str("id")
	if old == "" {
		return store.Job{}, fmt.Errorf("no id")
	}
	card, err := cardOf(r, cardColumn)
	if err != nil {
		return store.Job{}, err
	}
	id := newID(old)
	if !strings.HasPrefix(id, strings.ToLower(old)) {
		c.renamedIDs[old] = id
	}
	timeout := r.int("timeout")
	if timeout <= 0 {
		timeout = int64(o.defaultTimeout / time.Second)
	}
	j := store.Job{
		ID: id, Kind: store.KindJob, Device: &card,
		Cmd: r.str("cmd"), Cwd: r.str("cwd"), Timeout: timeout, Repeat: int(max(r.int("repeat"), 1)),
		ClientID: r.str("client_id"), SubmittedAt: unixTime(r, "submitted"),
		ResetEpoch: uint64(max(r.int("reset_epoch"), 0)), OwnerUID: o.ownerUID, Owner: o.owner, LegacyID: old,
	}
	if j.SubmittedAt.IsZero() {
		j.SubmittedAt = o.now
	}
	if strings.EqualFold(r.str("mode"), "reset") {
		// A reset runs root's (or TT_DEVICE_RESET_USER's) command: nothing
		// of the row but its card decides how, so neither its working
		// directory nor its environment is carried over.
		j.Kind, j.Cwd = store.KindReset, resetDir
		if j.Cmd == "" {
			j.Cmd = fmt.Sprintf("reset card %d", card)
		}
	} else if j.Env, err = c.env(r.str("env_json")); err != nil {
		return store.Job{}, err
	}
	switch status := r.str("status"); status {
	case "queued":
		j.State = store.StateQueued
		c.report.Queued++
		if j.Kind == store.KindReset {
			c.report.Resets++
		}
		return j, nil
	case "running":
		code := -1
		j.State, j.ExitCode, j.Outcome, j.Error = store.StateDone, &code, store.OutcomeInterrupted, interruptedError
		// It ran at least until the last sign of life of it or its tool:
		// its row's last update, the database's last write (the row still
		// said running), and (see copyOutputs) its output's last write.
		j.StartedAt = unixTime(r, "started_at")
		j.FinishedAt = later(unixTime(r, "updated_at"), o.lastWrite)
		if j.FinishedAt.After(o.now) {
			j.FinishedAt = o.now
		}
		if j.FinishedAt.Before(j.StartedAt) || j.FinishedAt.IsZero() {
			j.FinishedAt = later(j.StartedAt, j.SubmittedAt)
		}
		j.Iterations = int(max(r.int("repeat_current"), 1))
		c.report.Interrupted++
	case "done":
		j.State = store.StateDone
		j.StartedAt, j.FinishedAt = unixTime(r, "started_at"), unixTime(r, "finished_at")
		if j.FinishedAt.IsZero() {
			j.FinishedAt = j.SubmittedAt
		}
		j.Iterations = int(max(r.int("repeat_completed"), r.int("repeat_current")))
		if j.StartedAt.IsZero() {
			j.Iterations = 0
		}
		j.Error = r.str("error")
		code := -1
		if v, ok := r.num("exit_code"); ok {
			code = int(v)
		}
		j.ExitCode = &code
		switch _, stopped := r.num("stop_requested_at"); {
		case r.int("timed_out") != 0:
			j.Outcome = store.OutcomeTimeout
		case code == 0:
			j.Outcome = store.OutcomeSuccess
		case stopped:
			j.Outcome = store.OutcomeKilled
		default:
			j.Outcome = store.OutcomeFailure
		}
		c.report.Finished++
	default:
		return store.Job{}, fmt.Errorf("status %q: want queued, running or done", status)
	}
	j.LogTruncated = r.int("log_truncated") != 0
	j.DroppedLogBytes = max(r.int("dropped_log_bytes"), 0)
	if out := r.str("output_file"); out != "" {
		c.outputs[id] = out
	}
	return j, nil
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// env reads env_json, dropping what queued would refuse: names a shell
// cannot export, the variables queued sets itself, and variables longer
// than queued takes one (api.MaxEnvVarBytes).
func (c *converted) env(raw string) (map[string]string, error) {
	if strings.TrimSpace(raw) == "" || raw == "null" {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, fmt.Errorf("env_json: %w", err)
	}
	env := map[string]string{}
	for k, v := range m {
		s, ok := v.(string)
		if !ok || !validName(k) || reservedEnv[k] || strings.ContainsRune(s, 0) || len(k)+1+len(s) > api.MaxEnvVarBytes {
			c.report.DroppedEnv++
			continue
		}
		env[k] = s
	}
	if len(env) == 0 {
		return nil, nil
	}
	return env, nil
}

// cardOf is a row's card: its card column as a number, 0 when the
// database has no card column or the row none.
func cardOf(r row, column string) (int, error) {
	if column == "" || r[column] == nil {
		return 0, nil
	}
	s := strings.TrimSpace(r.str(column))
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s %q is not a card number", column, s)
	}
	return n, nil
}

// newID gives an old job id a queued id that it is a prefix of, so the
// old id (a prefix of at least 6 characters) still finds the job: the old
// id in lowercase hex, padded from a hash of it. An id that is not hex is
// replaced by the hash. The same old id always gives the same new one, so
// importing twice is detected.
func newID(old string) string {
	sum := sha256.Sum256([]byte("tt-device-queue import\x00" + old))
	pad := hex.EncodeToString(sum[:])
	h := strings.ToLower(strings.ReplaceAll(old, "-", ""))
	if !store.IsHex(h) || len(h) > store.IDLen {
		return pad[:store.IDLen]
	}
	return h + pad[:store.IDLen-len(h)]
}

func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return s != ""
}

// unixTime is a column of Unix seconds as a time; zero for NULL.
func unixTime(r row, col string) time.Time {
	f, ok := r.num(col)
	if !ok || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return time.Time{}
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9))
}
