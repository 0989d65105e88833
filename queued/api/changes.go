package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Changes is GET /changes, the daemon's change feed: it returns the
// scheduler's change generation at once when since is nil or differs
// from it, else when the next change comes or wait (at most MaxWait)
// runs out. A live view (the status page, tt-device-queue watch) reads
// Status after each answer instead of asking on a clock. Holders outside
// the queue are scanned, not notified, so an answer after a wait without
// a change is the cue to read Status again too.
func (c *Client) Changes(ctx context.Context, since *uint64, wait time.Duration) (uint64, error) {
	v := url.Values{}
	if since != nil {
		v.Set("since", strconv.FormatUint(*since, 10))
		v.Set("wait", seconds(min(wait, MaxWait)))
	}
	var out struct {
		Gen uint64 `json:"gen"`
	}
	_, err := c.do(ctx, http.MethodGet, "/changes?"+v.Encode(), nil, &out)
	return out.Gen, err
}
