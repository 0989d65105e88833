package scheduler

import (
	"time"

	"github.com/ttkit/ttkit/queued/store"
)

// Estimates, deliberately simple for now (issue 9 replaces this file with
// medians learned from history per command): each iteration of a job is
// expected to take the mean per-iteration run time of the card's last
// historySize finished jobs (success or failure), or DefaultRunEstimate
// before there is any. A job is expected to take that times its repeat
// count. A queued job's wait is the running job's expected remainder (never
// negative) plus the expected run time of every job ahead of it. The
// history lives in memory and starts empty at each start.

// DefaultRunEstimate is the expected iteration time with no history.
const DefaultRunEstimate = 60 * time.Second

const historySize = 20

// observe records a finished job's run time per iteration.
func (c *card) observe(run time.Duration, iterations int) {
	if iterations < 1 || run < 0 {
		return
	}
	c.history = append(c.history, run/time.Duration(iterations))
	if len(c.history) > historySize {
		c.history = c.history[len(c.history)-historySize:]
	}
}

// iterationEstimate is the expected run time of one iteration on this card.
func (c *card) iterationEstimate() time.Duration {
	if len(c.history) == 0 {
		return DefaultRunEstimate
	}
	var sum time.Duration
	for _, d := range c.history {
		sum += d
	}
	return sum / time.Duration(len(c.history))
}

// runEstimate is the expected run time of a whole job.
func (c *card) runEstimate(rec *store.Job) time.Duration {
	return c.iterationEstimate() * time.Duration(max(rec.Repeat, 1))
}

// remaining is the expected time until a running job ends.
func (c *card) remaining(rec *store.Job, now time.Time) time.Duration {
	return max(c.runEstimate(rec)-now.Sub(rec.StartedAt), 0)
}

// waits returns, for each queued job in order, the expected time until it
// starts; the last element is the wait of a job submitted now.
func (c *card) waits(now time.Time) []time.Duration {
	out := make([]time.Duration, len(c.queue)+1)
	var w time.Duration
	if c.current != nil {
		w = c.remaining(&c.current.rec, now)
	}
	for i, j := range c.queue {
		out[i] = w
		w += c.runEstimate(&j.rec)
	}
	out[len(c.queue)] = w
	return out
}

// tailWait is the expected wait of a job submitted now, behind the whole
// queue, without walking it.
func (c *card) tailWait(now time.Time) time.Duration {
	var w time.Duration
	if c.current != nil {
		w = c.remaining(&c.current.rec, now)
	}
	return w + c.iterationEstimate()*time.Duration(c.repeats)
}
