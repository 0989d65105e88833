package server

import (
	"fmt"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/scheduler"
	"github.com/ttkit/ttkit/queued/store"
)

// What the API keeps of the Python tt-device-queue's HTTP API, so a script
// written against that tool works with only the bearer token added: its
// request fields (cwd optional, mode, kill without a job id, client_id on
// a reset) and its answers' keys beside ttkit's own. docs/switching.md
// lists what still differs and why.

// pyTime is how the Python tool writes a time: the daemon's local time to
// the second.
const pyTime = "2006-01-02 15:04:05"

// pyCmdLen is how much of a command the Python tool's summaries show.
const pyCmdLen = 120

// pythonViews write the API's answers with the Python tool's keys beside
// ttkit's: a job's record, the default card's /status and the JSON form
// of GET /logs.
type pythonViews struct {
	sched  *scheduler.Scheduler
	recent recentCache // the Python tool's /status "recent"
}

// view is a job's record as the API answers it: ttkit's keys and the
// Python tool's.
func (v *pythonViews) view(info scheduler.JobInfo) api.Job {
	j := jobView(info)
	j.PythonJob = v.pythonJob(info, time.Now())
	return j
}

// pythonJob is the Python tool's view of a job record.
func (v *pythonViews) pythonJob(info scheduler.JobInfo, now time.Time) api.PythonJob {
	p := api.PythonJob{JobID: info.ID, Status: string(info.State), Mode: modeOf(info.Kind), OutputFile: v.sched.OutputPath(info.ID),
		TimedOut: info.Outcome == store.OutcomeTimeout, LogSize: info.LogBytes, RepeatCurrent: info.Iterations,
		RepeatCompleted: completed(&info.Job)}
	if p.TimedOut {
		p.TimeoutMessage = fmt.Sprintf("Command timed out after %ds; the queue sent SIGKILL.", info.Timeout)
	}
	switch info.State {
	case store.StateDone:
		e := elapsed(&info.Job)
		p.Elapsed = &e
		if info.Iterations > 0 {
			p.PerIterEstimateSec = round(e/float64(info.Iterations), 2)
		}
	case store.StateRunning:
		rs := round(now.Sub(info.StartedAt).Seconds(), 1)
		p.RunningSec = &rs
		fallthrough
	default:
		p.PerIterEstimateSec = round(info.EstimatedRun.Seconds()/float64(max(info.Repeat, 1)), 2)
	}
	return p
}

// modeOf is the Python tool's mode of a job kind.
func modeOf(k store.Kind) string {
	if k == store.KindReset {
		return "reset"
	}
	return "run"
}

// completed counts a job's iterations that succeeded: every one it ran
// when it succeeded, else all but the last one it started.
func completed(rec *store.Job) int {
	if rec.State == store.StateDone && rec.Outcome == store.OutcomeSuccess {
		return rec.Iterations
	}
	return max(rec.Iterations-1, 0)
}

// elapsed is a finished job's run time in seconds, 0 when it never
// started.
func elapsed(rec *store.Job) float64 {
	if rec.StartedAt.IsZero() || rec.FinishedAt.Before(rec.StartedAt) {
		return 0
	}
	return round(rec.FinishedAt.Sub(rec.StartedAt).Seconds(), 2)
}

func round(x float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(x*p) / p
}

// pyCut is the start of s, at most n bytes, cut at a character boundary
// and without a mark, as the Python tool cuts its summaries.
func pyCut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func pyTimePtr(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.Local().Format(pyTime)
	return &s
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// defaultCard is the card the Python tool's single-card keys describe: card
// 0, where a submission without device_id goes, else the first card.
func defaultCard(cards []scheduler.CardStatus) *scheduler.CardStatus {
	for i := range cards {
		if cards[i].ID == 0 {
			return &cards[i]
		}
	}
	if len(cards) == 0 {
		return nil
	}
	return &cards[0]
}

// pythonStatus is the Python tool's GET /status for the default card: its
// running job, its queue, its last finished jobs, its state and its
// worker's health.
func (v *pythonViews) pythonStatus(st scheduler.Status, now time.Time) api.PythonStatus {
	out := api.PythonStatus{Pending: []api.PyPending{}, Recent: []api.PyRecent{}}
	c := defaultCard(st.Cards)
	if c == nil {
		return out
	}
	if j := c.Current; j != nil {
		out.Current = &api.PyCurrent{ID: j.ID, Cmd: pyCut(j.Cmd, pyCmdLen), Client: j.ClientID,
			RunningSec: round(now.Sub(j.StartedAt).Seconds(), 1), EstimatedRemainingSec: round(j.EstimatedWait.Seconds(), 0),
			Repeat: j.Repeat, Mode: modeOf(j.Kind), RepeatCurrent: j.Iterations, RepeatCompleted: completed(&j.Job)}
	}
	for _, q := range c.Queue {
		out.Pending = append(out.Pending, api.PyPending{ID: q.ID, Cmd: pyCut(q.Cmd, pyCmdLen), Client: q.ClientID,
			WaitingSec: round(now.Sub(q.SubmittedAt).Seconds(), 1), EstimatedWaitSec: round(q.EstimatedWait.Seconds(), 0),
			EstimatedRunSec: round(q.EstimatedRun.Seconds(), 0), Repeat: q.Repeat, Mode: modeOf(q.Kind)})
	}
	out.Recent = v.recentOf(c.ID, now)
	dev := &api.PyDevice{DeviceID: strconv.Itoa(c.ID), State: pyState(c.State), ResetEpoch: c.ResetEpoch, ResetPending: c.Reset != nil,
		DeadSince: pyTimePtr(c.DeadSince), DeadReason: strPtr(c.DeadReason)}
	if c.LastReset != nil {
		dev.LastResetAt = pyTimePtr(c.LastReset.At)
	}
	switch {
	case !st.Persistence.OK:
		dev.QueueDisabled, dev.DisabledReason = true, strPtr("the store cannot be written: "+st.Persistence.Error)
	case st.Stopping:
		dev.QueueDisabled, dev.DisabledReason = true, strPtr("queued is stopping")
	}
	out.Device = dev
	wk := &api.PyWorker{Alive: !st.Stopping, DegradedReason: dev.DisabledReason}
	if why, ok := strings.CutPrefix(c.Worker, "paused: "); ok && wk.DegradedReason == nil {
		wk.DegradedReason = &why
	}
	if w := strings.TrimSpace(st.Retention.Warning + " " + st.Output.Warning); w != "" {
		wk.MaintenanceWarning = &w
	}
	out.Worker = wk
	return out
}

// recentScan bounds the finished records the default card's recent jobs
// are looked for among: the newest 2,000 of every card. A card with none
// among them (the others did all the work lately) shows none, at a cost
// of a few milliseconds rather than the tens a whole ListScan takes.
const recentScan = 2000

// recentCache keeps the default card's recent jobs until the scheduler's
// next change. Finding them reads the store, for a card with no recent
// job recentScan records: a status page or a script polling /status would
// pay that on every request, although nothing finished in between.
type recentCache struct {
	mu     sync.Mutex
	ok     bool
	gen    uint64
	card   int
	recent []api.PyRecent
}

// recentOf is card's last (at most 10) finished jobs, oldest first, as the
// Python tool's /status lists them.
func (v *pythonViews) recentOf(card int, now time.Time) []api.PyRecent {
	c := &v.recent
	c.mu.Lock()
	defer c.mu.Unlock()
	// The generation first: a change during the read below makes the
	// next request read again.
	gen, _ := v.sched.Changes()
	if c.ok && c.gen == gen && c.card == card {
		return c.recent
	}
	infos, err := v.sched.List(scheduler.ListFilter{Card: &card, State: store.StateDone, Limit: 10, Scan: recentScan})
	if err != nil {
		return []api.PyRecent{}
	}
	recent := make([]api.PyRecent, 0, len(infos))
	for _, r := range slices.Backward(infos) {
		p := v.pythonJob(r, now)
		recent = append(recent, api.PyRecent{ID: r.ID, Cmd: pyCut(r.Cmd, pyCmdLen), ExitCode: r.ExitCode, Elapsed: p.Elapsed,
			Finished: r.FinishedAt.Local().Format(pyTime), OutputFile: p.OutputFile, Repeat: r.Repeat, Mode: p.Mode, Client: r.ClientID,
			RepeatCompleted: p.RepeatCompleted, PerIterEstimateSec: p.PerIterEstimateSec, TimedOut: p.TimedOut, LogTruncated: r.LogTruncated})
	}
	c.ok, c.gen, c.card, c.recent = true, gen, card, recent
	return recent
}

// wantsRaw reports whether a GET /logs request asks for the output bytes
// themselves (Accept: application/octet-stream) rather than the Python
// tool's JSON, which is the default: that tool's clients, curl and most
// HTTP libraries send no Accept or */*.
func wantsRaw(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == api.RawOutput {
				return true
			}
		}
	}
	return false
}

// writeLogsJSON answers GET /logs in the Python tool's shape.
func (v *pythonViews) writeLogsJSON(w http.ResponseWriter, info scheduler.JobInfo, offset, next, size int64, done bool, data []byte) {
	writeJSON(w, http.StatusOK, api.LogsAnswer{JobID: info.ID, Status: string(info.State), OutputFile: v.sched.OutputPath(info.ID),
		Offset: offset, NextOffset: next, Content: string(data), Truncated: next < size, Complete: done,
		LogSize: size, LogTruncated: info.LogTruncated || info.LogCutBytes > 0, DroppedLogBytes: info.DroppedLogBytes + info.LogCutBytes})
}

// killed is the Python tool's account of a kill: SIGINT for a running job
// (then SIGTERM and SIGKILL after their graces), no signal for a queued one.
func killed(info scheduler.JobInfo) *api.Killed {
	k := &api.Killed{ID: info.ID, Cmd: pyCut(info.Cmd, pyCmdLen)}
	if info.State == store.StateRunning {
		sig := "SIGINT"
		k.Signal = &sig
	}
	return k
}

// resetAction is the Python tool's word for what a reset request did on
// one card.
func resetAction(o scheduler.ResetOutcome) string {
	switch {
	case o.Skipped:
		return api.ResetAlreadyReset
	case o.Coalesced:
		return api.ResetJoined
	}
	return api.ResetScheduled
}

// resetHints are the Python tool's sentences for each action.
var resetHints = map[string]string{
	api.ResetScheduled:    "Reset is scheduled before the next job.",
	api.ResetJoined:       "A reset is already pending or in progress.",
	api.ResetAlreadyReset: "Device was already reset after this job ran. Resubmit the job.",
}

// pythonReset fills the Python tool's keys of a reset answer: the
// strongest action among the entries, and the first card's state and
// reset count before the request (before, from the status taken then).
func pythonReset(resp *api.ResetResponse, before scheduler.Status) {
	rank := map[string]int{api.ResetAlreadyReset: 1, api.ResetJoined: 2, api.ResetScheduled: 3}
	for _, e := range resp.Resets {
		if rank[e.Action] > rank[resp.Action] {
			resp.Action = e.Action
		}
	}
	resp.Hint = resetHints[resp.Action]
	if len(resp.Resets) == 0 {
		return
	}
	for _, c := range before.Cards {
		if strconv.Itoa(c.ID) == resp.Resets[0].DeviceID {
			resp.DeviceState, resp.ResetEpoch = pyState(c.State), c.ResetEpoch
		}
	}
}

// pyState is a card's state in the Python tool's words (healthy,
// resetting, dead), which its clients know: a recovering card is
// resetting, and an unfit one, whose jobs are still taken and queued, is
// healthy to them (queued's own /status says unfit and why).
func pyState(st scheduler.CardState) string {
	switch st {
	case scheduler.Recovering:
		return "resetting"
	case scheduler.Unfit:
		return string(scheduler.Healthy)
	}
	return string(st)
}
