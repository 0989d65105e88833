package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

// Exit statuses other than a job's own.
const (
	ExitOK      = 0
	ExitRefused = 1 // the daemon refused the request
	// ExitUnreachable is for a daemon that cannot be reached, or that is
	// not queued: 1, as the Python tt-device-queue exits, so scripts that
	// test for it keep working.
	ExitUnreachable = 1
	ExitUsage       = 2   // bad command line
	ExitWaitTimeout = 124 // --wait-timeout ran out; the job goes on
	ExitInterrupted = 130 // SIGINT or SIGTERM stopped the local wait; the job goes on
)

// Error is a failure together with the exit status it calls for. Main
// prints Err (when set) and exits with Code; kong reads Code through
// kong.ExitCoder. A job's own failing status is an Error without Err.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

// Unwrap gives errors.Is and errors.As the cause.
func (e *Error) Unwrap() error { return e.Err }

// ExitCode implements kong.ExitCoder.
func (e *Error) ExitCode() int { return e.Code }

// usageErr is a bad command line found after parsing, such as a malformed
// --env.
func usageErr(format string, args ...any) error {
	return &Error{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// Causes of a cancelled context, told apart with context.Cause.
var (
	errInterrupted = errors.New("interrupted")
	errWaitTimeout = errors.New("wait timed out")
)

// startHint ends every message about an unreachable daemon.
const startHint = "queued is not running (or not at this address). Start it with `systemctl --user start queued`, or run `queued` in another terminal"

// explain turns an error from the client into an Error with the right
// status: the daemon's refusal (1), an interrupted or timed-out local wait
// (130, 124; callers that know the job word these themselves), or a
// daemon that cannot be reached (1, ExitUnreachable). err must not be nil.
func (a *App) explain(ctx context.Context, err error) *Error {
	var ae *api.Error
	if errors.As(err, &ae) && ae.NotQueued {
		return &Error{Code: ExitUnreachable, Err: errors.New(ae.Message)}
	}
	var be *api.BusyError
	if errors.As(err, &be) {
		// Busy at one of its bounds, still after the client's retries.
		return &Error{Code: ExitRefused, Err: fmt.Errorf("queued is busy: %s (gave up after %d tries over %s)",
			strings.Join(strings.Fields(be.Err.Message), " "), be.Tries, be.Waited.Round(100*time.Millisecond))}
	}
	if errors.As(err, &ae) {
		// The daemon's own words, on one line whatever they hold: a
		// refusal such as 403 "job X belongs to bob ..." is one message.
		msg := strings.Join(strings.Fields(ae.Message), " ")
		if ae.StatusCode == http.StatusUnauthorized {
			msg += fmt.Sprintf(" (the token in %s is not this daemon's: is TT_DEVICE_LOG_DIR the daemon's state directory?)", a.stateDir)
		}
		return &Error{Code: ExitRefused, Err: fmt.Errorf("queued refused the request: %s", msg)}
	}
	if ctx.Err() != nil {
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, errInterrupted):
			return &Error{Code: ExitInterrupted, Err: errInterrupted}
		case errors.Is(cause, errWaitTimeout):
			return &Error{Code: ExitWaitTimeout, Err: errWaitTimeout}
		}
	}
	// The innermost network error says it best ("connect: connection
	// refused"); the URL is in the message already.
	var op *net.OpError
	if errors.As(err, &op) {
		err = op.Err
	}
	hint := startHint
	switch {
	case denied(err) && a.via == viaOwn:
		hint = "You may not use that queue: its state directory (TT_DEVICE_LOG_DIR) belongs to someone else; each user's queued has its own."
	case denied(err) && a.via != viaTCP:
		hint = "You may not use that queue: the socket's permissions keep you out (a shared queued lets only its group in, TT_DEVICE_SOCKET_GROUP); ask the host's admin."
	case errors.Is(err, syscall.ENOENT) && a.via == viaGiven:
		hint = "No socket there: is --host (TT_DEVICE_URL) right? " + startHint
	case errors.Is(err, syscall.ECONNREFUSED) && a.via != viaTCP:
		hint = "Its socket is left over from a stop or a crash. " + startHint
	}
	return &Error{Code: ExitUnreachable, Err: fmt.Errorf("cannot reach queued at %s: %w\n%s", a.url, err, hint)}
}

// jobStatus is the exit status for a job's exit code: the code itself,
// 128+N for a signal N (recorded as -N), at most 255.
func jobStatus(code int) int {
	if code < 0 {
		code = 128 - code
	}
	return min(code, 255)
}
