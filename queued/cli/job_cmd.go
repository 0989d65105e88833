package cli

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

// JobCmd shows one job's record.
type JobCmd struct {
	ID string `arg:"" placeholder:"JOB_ID" help:"Job id, or a unique prefix of at least 6 characters."`
}

// Run fetches and prints the job.
func (j *JobCmd) Run(a *App) error {
	c, err := a.connect()
	if err != nil {
		return err
	}
	job, err := c.Job(a.ctx, j.ID)
	if err != nil {
		return a.explain(a.ctx, err)
	}
	if a.JSON {
		return a.printJSON(job)
	}
	a.printFields(jobFields(job, time.Now()))
	return nil
}

// jobFields lays out a job for people.
func jobFields(j api.Job, now time.Time) fields {
	var f fields
	f.add("id", "%s", j.ID)
	if j.Kind != "" && j.Kind != "job" {
		f.add("kind", "%s", j.Kind)
	}
	f.add("card", "%s", j.DeviceID)
	switch j.State {
	case "queued":
		f.add("state", "queued: position %d, estimated wait %s, then %s to run", j.Position, fmtWait(j.EstimatedWaitSec), runEstimate(j.EstimatedRunSec, j.EstimateKnown))
	case "running":
		s := "running"
		if j.StartedAt != nil {
			s += " for " + fmtDuration(now.Sub(*j.StartedAt))
		}
		if j.PID != 0 {
			s += ", process group " + itoa(j.PID)
		}
		f.add("state", "%s, %s", s, remaining(j))
	default:
		f.add("state", "%s, %s", j.State, describeEnd(j))
	}
	f.addLines("cmd", "%s", j.Cmd)
	f.add("cwd", "%s", j.Cwd)
	var given, shell []string
	for k := range j.Env {
		if slices.Contains(j.EnvFromShell, k) {
			shell = append(shell, k)
		} else {
			given = append(given, k)
		}
	}
	for _, e := range []struct {
		label string
		names []string
	}{{"env", given}, {"shell env", shell}} {
		if len(e.names) == 0 {
			continue
		}
		sort.Strings(e.names)
		pairs := make([]string, len(e.names))
		for i, k := range e.names {
			pairs[i] = k + "=" + j.Env[k]
		}
		f.add(e.label, "%s", strings.Join(pairs, " "))
	}
	f.add("timeout", "%ds for the whole job", j.Timeout)
	f.add("repeat", "%d (iterations run: %d)", max(j.Repeat, 1), j.Iterations)
	addEndings(&f, j)
	if o := ownerText(j.Owner, j.OwnerUID); o != "" {
		f.add("owner", "%s", o)
	}
	if j.ClientID != "" {
		f.add("client", "%s", j.ClientID)
	}
	if j.Agent != "" {
		f.add("agent", "%s (queued through tt-device-queue mcp)", termText(oneLine(j.Agent)))
	}
	if j.LegacyID != "" && j.LegacyID != j.ID {
		f.add("legacy id", "%s (its id in the Python tt-device-queue's database)", j.LegacyID)
	}
	f.add("submitted", "%s", fmtTime(j.SubmittedAt, now))
	if j.StartedAt != nil {
		f.add("started", "%s, after waiting %s", fmtTime(*j.StartedAt, now), fmtDuration(j.StartedAt.Sub(j.SubmittedAt)))
	}
	if j.FinishedAt != nil && j.StartedAt != nil {
		f.add("finished", "%s, after running %s", fmtTime(*j.FinishedAt, now), fmtDuration(j.FinishedAt.Sub(*j.StartedAt)))
	} else if j.FinishedAt != nil {
		f.add("finished", "%s", fmtTime(*j.FinishedAt, now))
	}
	out := itoa64(j.LogBytes) + " bytes"
	switch {
	case j.LogCutBytes > 0:
		out += fmt.Sprintf("; past TT_DEVICE_MAX_LOG_BYTES only the first %d and the last %d are kept, %d in between were cut",
			j.LogCutAt, j.LogBytes-j.LogCutAt-j.LogCutBytes, j.LogCutBytes)
	case j.LogTruncated:
		out += ", cut at the limit; " + itoa64(j.DroppedLogBytes) + " bytes dropped"
	}
	if j.LogError != "" {
		out += "; " + j.LogError
	}
	if j.OutputDeletedAt != nil {
		out += ", deleted " + fmtTime(*j.OutputDeletedAt, now) + " to keep all jobs' output within TT_DEVICE_MAX_OUTPUT_BYTES"
	}
	f.add("output", "%s", out)
	if j.Held {
		f.add("note", "the final record waits in memory until the store takes writes again")
	}
	return f
}

// addEndings shows what docs/job-endings.md describes: the idle
// timeout, the signal that stopped the job, and its attempts ("attempt
// 2/3", then how each earlier one ended).
func addEndings(f *fields, j api.Job) {
	if j.IdleTimeout > 0 {
		f.add("idle timeout", "%ds without output ends it as hung", j.IdleTimeout)
	}
	if j.KillRung != "" {
		f.add("stopped by", "%s (the kill ladder: SIGINT, SIGTERM, SIGKILL)", j.KillRung)
	}
	if len(j.After) > 0 {
		f.add("after", "%s (--after-mode %s)", shortIDs(j.After), j.AfterMode)
	}
	if len(j.WaitsFor) > 0 {
		f.add("waits for", "%s to end; the jobs behind it on its card go first meanwhile", shortIDs(j.WaitsFor))
	}
	if j.Retries > 0 || j.Attempt > 1 {
		f.add("retries", "attempt %d/%d (it runs again when its card ends it)", max(j.Attempt, 1), j.Retries+1)
	}
	for _, a := range j.Attempts {
		code := fmt.Sprintf("exit %d", a.ExitCode)
		if a.Error != "" {
			code += ": " + a.Error
		}
		f.add("earlier", "attempt %d: %s (%s)", a.Attempt, a.Outcome, code)
	}
}
