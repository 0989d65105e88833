package server

import (
	"github.com/ttkit/ttkit/queued/api"
	"strconv"
	"strings"
	"time"

	"github.com/ttkit/ttkit/queued/jobcgroup"
	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/scheduler"
	"github.com/ttkit/ttkit/queued/store"
)

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// jobView turns a scheduler record into the wire type.
func jobView(info scheduler.JobInfo) api.Job {
	j := api.Job{
		ID: info.ID, Kind: string(info.Kind), DeviceID: info.DeviceText(), CrossCards: info.CrossCards,
		Reason: info.Reason, ExpiresAt: timePtr(info.ExpiresAt), SlurmJobID: info.SlurmJobID,
		Cmd: info.Cmd, Cwd: info.Cwd, Env: info.Env, EnvFromShell: info.EnvFromShell, Timeout: info.Timeout, Repeat: info.Repeat,
		ClientID: info.ClientID, Agent: info.Agent, OwnerUID: info.OwnerUID, Owner: info.Owner, LegacyID: info.LegacyID, State: string(info.State), Position: info.Position,
		SubmittedAt: info.SubmittedAt.UTC(), StartedAt: timePtr(info.StartedAt), FinishedAt: timePtr(info.FinishedAt),
		ExitCode: info.ExitCode, Outcome: string(info.Outcome), Error: info.Error, Iterations: info.Iterations,
		LogBytes: info.LogBytes, LogTruncated: info.LogTruncated, DroppedLogBytes: info.DroppedLogBytes,
		LogError: info.LogError, LogCutAt: info.LogCutAt, LogCutBytes: info.LogCutBytes, Held: info.Held, OutputDeletedAt: timePtr(info.OutputDeletedAt),
		CmdTruncated: info.CmdTruncated(), CmdBytes: len(info.Cmd), EnvVars: len(info.Env), EnvBytes: api.EnvBytes(info.Env),
		KillRung: info.KillRung, IdleTimeout: info.IdleTimeout, Attempt: info.AttemptNo(), Retries: info.Retries,
		After: info.After, AfterMode: string(info.AfterMode), WaitsFor: info.WaitsFor, ArrayID: info.ArrayID,
	}
	if info.ArrayID != "" {
		j.ArrayIndex = &info.ArrayIndex
	}
	for _, a := range info.Attempts {
		j.Attempts = append(j.Attempts, api.Attempt{Attempt: a.Attempt, StartedAt: timePtr(a.StartedAt), FinishedAt: timePtr(a.FinishedAt),
			ExitCode: a.ExitCode, Outcome: string(a.Outcome), Error: a.Error, KillRung: a.KillRung})
	}
	if info.Brief {
		// What the brief record left out, as it says.
		j.CmdBytes, j.EnvVars, j.EnvBytes = max(info.CmdBytes, len(info.Cmd)), info.EnvVars, info.EnvBytes
	}
	if j.Kind == "" {
		j.Kind = string(store.KindJob)
	}
	if info.Spans() {
		j.Devices = info.Devices
	}
	switch info.State {
	case store.StateQueued:
		j.EstimatedWaitSec = info.EstimatedWait.Seconds()
		j.EstimatedRunSec = info.EstimatedRun.Seconds()
		j.EstimateKnown = info.EstimateKnown
	case store.StateRunning:
		j.EstimatedRemainingSec = info.EstimatedWait.Seconds()
		j.EstimatedRunSec = info.EstimatedRun.Seconds()
		j.EstimateKnown, j.OverdueSec = info.EstimateKnown, info.Overdue.Seconds()
		j.PID = info.PGID
	}
	return j
}

func summaryView(info scheduler.JobInfo) api.JobSummary {
	return api.JobSummary{
		ID: info.ID, Kind: string(info.Kind), Devices: spanned(info.Job), Cmd: cut(info.Cmd, 200), ClientID: info.ClientID, Agent: info.Agent, Repeat: info.Repeat,
		OwnerUID: info.OwnerUID, Owner: info.Owner, Position: info.Position, EstimatedWaitSec: info.EstimatedWait.Seconds(), EstimatedRunSec: info.EstimatedRun.Seconds(),
		EstimateKnown: info.EstimateKnown, OverdueSec: info.Overdue.Seconds(),
		SubmittedAt: info.SubmittedAt.UTC(), StartedAt: timePtr(info.StartedAt), PID: info.PGID,
		Attempt: attemptOf(info.Job), Retries: info.Retries, WaitsFor: info.WaitsFor,
	}
}

// attemptOf is a job's attempt for a summary: absent (0) for a job that
// has no retries and never ran again.
func attemptOf(rec store.Job) int {
	if rec.Retries == 0 && rec.Attempt <= 1 {
		return 0
	}
	return rec.AttemptNo()
}

// statusView turns the scheduler's snapshot into the wire type.
func statusView(st scheduler.Status) api.Status {
	out := api.Status{
		Queued: st.Queued, MaxQueued: st.MaxQueued, Stopping: st.Stopping, Warnings: st.Warnings, VisibleDevices: "off",
		Persistence: api.Persistence{OK: st.Persistence.OK, Error: st.Persistence.Error, Since: timePtr(st.Persistence.Since),
			HeldRecords: st.Persistence.Held, Attempts: st.Persistence.Attempts},
		Retention: api.Retention{LastRun: timePtr(st.Retention.LastRun), Deleted: st.Retention.Deleted, Warning: st.Retention.Warning},
		Output: api.Output{Bytes: st.Output.Bytes, MaxBytes: st.Output.Budget, Deleted: st.Output.Deleted, Warning: st.Output.Warning,
			MaxBytesPerUser: st.Output.PerUserBudget},
	}
	if st.VisibleBDF {
		out.VisibleDevices = "bdf"
	}
	out.JobTracking = trackingView()
	for _, c := range st.Cards {
		cs := api.CardStatus{DeviceID: strconv.Itoa(c.ID), State: string(c.State), Reason: c.Reason, UnfitSince: timePtr(c.UnfitSince), Worker: c.Worker,
			Rung: c.Rung, Recovery: c.Recovery,
			Pending: make([]api.JobSummary, len(c.Queue)), EstimatedWaitSec: c.EstimatedWait.Seconds()}
		if c.Current != nil {
			cur := summaryView(*c.Current)
			cs.Current = &cur
		}
		if !c.WaitingSince.IsZero() {
			since := c.WaitingSince.UTC()
			cs.WaitingSince = &since
		}
		for i, q := range c.Queue {
			cs.Pending[i] = summaryView(q)
		}
		cs.Reset, cs.LastReset = resetView(c.Reset), resetView(c.LastReset)
		if !c.DeadSince.IsZero() || c.DeadReason != "" {
			cs.DeadReason, cs.DeadSince = c.DeadReason, timePtr(c.DeadSince)
		}
		for _, h := range c.Foreign {
			cs.Foreign = append(cs.Foreign, api.Holder{PID: h.PID, FriendlyName: h.FriendlyName, CommandLine: h.CommandLine, JobID: h.JobID, ClaimedJobID: h.ClaimedJobID})
		}
		cs.ForeignError, cs.ForeignWait = c.ForeignError, c.ForeignWait
		if why, ok := strings.CutPrefix(c.Worker, "paused: "); ok {
			cs.PausedReason = why
		}
		cs.CardType, cs.Serial, cs.ASICID, cs.PCIAddress = c.Identity.Info.CardType, c.Identity.Info.Serial, c.Identity.Info.ASICID, c.Identity.PCIAddress
		for _, x := range c.CrossCard {
			cs.CrossCard = append(cs.CrossCard, x.Advice())
		}
		out.Cards = append(out.Cards, cs)
	}
	return out
}

func resetView(r *scheduler.ResetInfo) *api.ResetInfo {
	if r == nil {
		return nil
	}
	return &api.ResetInfo{JobID: r.JobID, State: string(r.State), Result: r.Result, Detail: r.Detail, At: r.At.UTC()}
}

// spanned is the cards of a job that takes several, nil for one card.
func spanned(rec store.Job) []int {
	if rec.Spans() {
		return rec.Devices
	}
	return nil
}

// trackingView is what holds this daemon's jobs: a cgroup each, an audit
// session each, and why not.
func trackingView() *api.JobTracking {
	t := &api.JobTracking{Cgroup: jobcgroup.Default() != nil}
	var why []string
	if err := jobcgroup.DefaultReason(); err != nil {
		why = append(why, "no cgroup per job: "+err.Error())
	}
	audit, reason := runner.AuditSessions()
	t.AuditSession = audit
	if !audit {
		why = append(why, "no audit session per job: "+reason)
	}
	t.Detail = strings.Join(why, "; ")
	return t
}
