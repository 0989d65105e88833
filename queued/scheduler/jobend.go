package scheduler

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/store"
)

// How a job ends because of its card, and what follows: the hung outcome,
// the record of the kill ladder, and retries (docs/job-endings.md).

// HungExitCode is the exit code of a job ended as hung: not a signal's
// -N (there is no signal 124), so it cannot be mistaken for one, and 124
// as GNU timeout exits when its limit ends a command. The CLI's run and
// result exit 252 for it (128+124).
const HungExitCode = -124

// ErrInvalid refuses a job spec with a value out of its bounds; the
// error names the value.
var ErrInvalid = errors.New("invalid job")

// checkEndings validates the spec's idle timeout and retries.
func checkEndings(spec *JobSpec) error {
	switch {
	case spec.IdleTimeout < 0:
		return fmt.Errorf("idle timeout %d s is negative: %w", int64(spec.IdleTimeout/time.Second), ErrInvalid)
	case spec.IdleTimeout > api.MaxSeconds*time.Second:
		return fmt.Errorf("idle timeout %d s is above %d: %w", int64(spec.IdleTimeout/time.Second), api.MaxSeconds, ErrInvalid)
	case spec.Retries < 0 || spec.Retries > api.MaxRetries:
		return fmt.Errorf("retries %d: want 0 to %d: %w", spec.Retries, api.MaxRetries, ErrInvalid)
	}
	return nil
}

// signalName is the kill ladder's rung as a record reads it.
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	}
	return ""
}

// hungError is a hung job's error: how long it was silent, and the
// signal that ended it.
func hungError(rec *store.Job, res runner.Result) string {
	return fmt.Sprintf("wrote no output for %ds (its idle timeout) and was stopped with %s", rec.IdleTimeout, signalName(res.KillSignal))
}

// byItsCard reports whether a job's end is its card's doing rather than
// its own: hung (a wedged dispatch prints nothing), or interrupted by a
// reset of its card. A service stop or a crash of queued is not: the
// never-replay rule stands.
func byItsCard(rec *store.Job, reason stopReason) bool {
	return rec.Outcome == store.OutcomeHung || rec.Outcome == store.OutcomeInterrupted && reason == stopReset
}

// failedGateAfter reports whether a job that failed (by its exit status
// or its timeout) did so on a card that is unfit now, at the gate after
// it: its card's doing, so it may run again. cards are the job's. A job
// killed by request, interrupted or hung is never counted here.
func failedGateAfter(rec *store.Job, cards cardSet) bool {
	if rec.Kind != store.KindJob || rec.State != store.StateDone ||
		rec.Outcome != store.OutcomeFailure && rec.Outcome != store.OutcomeTimeout {
		return false
	}
	for _, c := range cards {
		if c.unfit != "" {
			return true
		}
	}
	return false
}

// nextAttempt readies j to run again, when its done record rec ended
// because of its card (byCard: see byItsCard and failedGateAfter) and it
// has retries left: rec's ending is kept in j's record as an earlier
// attempt and the attempt counts on. It reports whether it did; the
// caller then puts j back at the head of its cards' queues (behind a
// pending reset), where the gate holds it until the card is fit again.
// Call with core.mu held.
func nextAttempt(j *job, rec *store.Job, byCard bool) bool {
	if j.killed || !byCard || rec.AttemptNo() > j.rec.Retries {
		return false
	}
	code := -1
	if rec.ExitCode != nil {
		code = *rec.ExitCode
	}
	j.rec.Attempts = append(append([]store.Attempt(nil), j.rec.Attempts...), store.Attempt{
		Attempt: rec.AttemptNo(), StartedAt: rec.StartedAt, FinishedAt: rec.FinishedAt,
		ExitCode: code, Outcome: rec.Outcome, Error: rec.Error, KillRung: rec.KillRung,
	})
	j.rec.Attempt = rec.AttemptNo() + 1
	j.rec.KillRung = ""
	return true
}

// attemptHeader is the line each attempt of a job that may be retried
// begins its output with, so the log reads which run is which.
func attemptHeader(rec *store.Job) string {
	return fmt.Sprintf("\n[tt-device-queue] attempt %d/%d\n", rec.AttemptNo(), rec.Retries+1)
}
