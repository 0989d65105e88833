package server

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/ttkit/ttkit/queued/scheduler"
)

// base is what every part of the server starts from: the scheduler, the
// access rules (the one place that knows the daemon's mode) and the
// logger, and the steps built on them that handlers share: finding the
// job a request is about (jobFor) and answering an error (fail).
type base struct {
	sched *scheduler.Scheduler
	rules *accessRules
	log   *slog.Logger
}

// resolve validates an id or prefix and finds the one job it names.
func (b *base) resolve(field, raw string) (string, error) {
	id, err := decodeID(field, raw)
	if err != nil {
		return "", err
	}
	return b.sched.Resolve(id)
}

// jobFor is the first step of every request about one job: raw, the id
// or prefix given in field, resolved to one job, the job's record, and
// the caller's right to see it (see) or to stop it (!see). Its error is
// the refusal to answer: a bad id (400), no such job (404), a prefix of
// several (409), another user's job (403).
func (b *base) jobFor(r *http.Request, field, raw string, see bool) (scheduler.JobInfo, error) {
	id, err := b.resolve(field, raw)
	if err != nil {
		return scheduler.JobInfo{}, err
	}
	info, err := b.sched.Job(id)
	if err != nil {
		return info, err
	}
	return info, b.rules.of(r).mayTouch(&info.Job, see)
}

// fail maps an error to its status code: 400 bad field, 403 another
// user's job on a shared daemon, 404 unknown job,
// 409 ambiguous prefix, finished job or running reset, 413 body too
// large, 429 queue full, 503 persistence failing, stopping, card dead or
// no reset commands.
func (b *base) fail(w http.ResponseWriter, r *http.Request, err error) {
	var fe *FieldError
	code := http.StatusInternalServerError
	switch {
	case errors.As(err, &fe), errors.Is(err, scheduler.ErrUnknownCard):
		code = http.StatusBadRequest
	case errors.Is(err, errBodyTooLarge):
		code = http.StatusRequestEntityTooLarge
	case errors.Is(err, scheduler.ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, ErrForbidden):
		code = http.StatusForbidden
	case errors.Is(err, scheduler.ErrAmbiguous), errors.Is(err, scheduler.ErrFinished), errors.Is(err, scheduler.ErrResetRunning),
		errors.Is(err, ErrConflict):
		code = http.StatusConflict
	case errors.Is(err, scheduler.ErrQueueFull):
		code = http.StatusTooManyRequests
	case errors.Is(err, scheduler.ErrPersistence), errors.Is(err, scheduler.ErrStopping), errors.Is(err, scheduler.ErrCardDead),
		errors.Is(err, scheduler.ErrNoControls):
		code = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "5")
	}
	if code == http.StatusInternalServerError {
		b.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeError(w, code, errorMessage(err))
}

// errorMessage words scheduler errors for people.
func errorMessage(err error) string {
	switch {
	case errors.Is(err, scheduler.ErrQueueFull):
		var full *scheduler.QueueFullError
		if errors.As(err, &full) && full.PerUser {
			return "queue full for this user: " + err.Error() + " (TT_DEVICE_MAX_QUEUED_PER_USER); try again when some of them have run"
		}
		return "queue full: " + err.Error() + " (TT_DEVICE_MAX_QUEUED_JOBS); try again when some have run"
	case errors.Is(err, scheduler.ErrPersistence):
		return "refused, nothing changed: the store cannot be written (" + err.Error() + "); see /status"
	case errors.Is(err, scheduler.ErrStopping):
		return "not accepting jobs: queued is stopping"
	}
	return err.Error()
}
