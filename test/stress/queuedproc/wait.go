package queuedproc

import (
	"context"
	"fmt"
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

// WaitRunning polls GET /job until the job is running (or done), with
// ctx as the deadline. A job's start has no long-poll of its own, so this
// is the one place the suites poll the API.
func WaitRunning(ctx context.Context, c *api.Client, id string) (api.Job, error) {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		j, err := c.Job(ctx, id)
		if err != nil {
			return j, err
		}
		if j.State != "queued" {
			return j, nil
		}
		select {
		case <-ctx.Done():
			return j, fmt.Errorf("job %s still queued: %w", id, ctx.Err())
		case <-tick.C:
		}
	}
}

// WaitStatus polls GET /status until ok accepts it, with ctx as the
// deadline, and returns the accepted status.
func WaitStatus(ctx context.Context, c *api.Client, ok func(api.Status) bool) (api.Status, error) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := c.Status(ctx)
		if err == nil && ok(st) {
			return st, nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return st, fmt.Errorf("waiting for status: %w", err)
		case <-tick.C:
		}
	}
}
