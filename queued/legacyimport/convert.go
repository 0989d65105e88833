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

	"github.com/ttkit/ttkit/queued/store"
)

// interruptedError is the error of a job that was running when the Python
// tool stopped: like a job interrupted by a restart of queued, it is never
// run again.
const interruptedError = "interrupted: it was running when the Python tt-device-queue stopped; imported, never run again"

// reservedEnv are variables queued sets on every job itself.
var reservedEnv = map[string]bool{"TT_QUEUE_JOB_ID": true, "TT_QUEUE_DEVICE": true}

// converted is the database as store records.
type converted struct {
	jobs       []store.Job
	outputs    map[string]string // new job id -> the old output file to copy
	cards      []store.Card
	report     Report
	renamedIDs map[string]string // old id -> new id, where the old is not a prefix of the new
}

// convert turns the rows into store records. Queued rows stay queued (and
// keep their order: the caller stores them in the order returned),
// running rows end as interrupted, done rows become history. A row it
// cannot place (an unknown status, a card that is not a number) stops the
// whole import, naming the row.
func convert(l *legacyDB, defaultTimeout time.Duration, now time.Time) (*converted, error) {
	c := &converted{outputs: map[string]string{}, renamedIDs: map[string]string{}}
	c.report.UserVersion = l.userVersion
	c.report.CardColumn = l.cardColumn
	boots := map[int]string{}
	for _, s := range l.states {
		if card, err := cardOf(s, l.cardColumn); err == nil {
			boots[card] = s.str("boot_id")
		}
	}
	for _, r := range l.jobs {
		j, err := c.job(r, l.cardColumn, defaultTimeout, now)
		if err != nil {
			return nil, fmt.Errorf("row seq %s (job %s): %w", r.str("seq"), r.str("id"), err)
		}
		if j.Kind == store.KindReset && j.State == store.StateQueued {
			// queued retries a pending reset only on the boot it was asked
			// for; the card state's boot is the best record of that.
			j.BootID = boots[j.Card()]
		}
		c.jobs = append(c.jobs, j)
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
		c.cards = append(c.cards, rec)
	}
	sort.Slice(c.cards, func(i, k int) bool { return c.cards[i].ID < c.cards[k].ID })
	sort.Ints(c.report.DeadCards)
	return c, nil
}

// job converts one jobs row.
func (c *converted) job(r row, cardColumn string, defaultTimeout time.Duration, now time.Time) (store.Job, error) {
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
		timeout = int64(defaultTimeout / time.Second)
	}
	j := store.Job{
		ID: id, Kind: store.KindJob, Device: &card,
		Cmd: r.str("cmd"), Cwd: r.str("cwd"), Timeout: timeout, Repeat: int(max(r.int("repeat"), 1)),
		ClientID: r.str("client_id"), SubmittedAt: unixTime(r, "submitted"),
		ResetEpoch: uint64(max(r.int("reset_epoch"), 0)),
	}
	if j.SubmittedAt.IsZero() {
		j.SubmittedAt = now
	}
	if strings.EqualFold(r.str("mode"), "reset") {
		j.Kind = store.KindReset
		if j.Cmd == "" {
			j.Cmd = fmt.Sprintf("reset card %d", card)
		}
	}
	if j.Env, err = c.env(r.str("env_json")); err != nil {
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
		j.StartedAt, j.FinishedAt = unixTime(r, "started_at"), unixTime(r, "updated_at")
		if j.FinishedAt.Before(j.StartedAt) || j.FinishedAt.IsZero() {
			j.FinishedAt = now
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

// env reads env_json, dropping what queued would refuse: names a shell
// cannot export and the variables queued sets itself.
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
		if !ok || !validName(k) || reservedEnv[k] || strings.ContainsRune(s, 0) {
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
