package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// MaxListLimit is the most jobs GET /jobs answers with at once, and
// DefaultListLimit how many it answers with when the request names no
// limit.
const (
	MaxListLimit     = 1000
	DefaultListLimit = 50
)

// ListQuery selects jobs for GET /jobs. Zero fields select everything;
// Limit 0 means DefaultListLimit.
type ListQuery struct {
	DeviceID string // a card number
	State    string // queued, running or done
	ClientID string
	// Mine asks for the caller's own jobs: on a system-mode daemon those
	// it submitted (by uid, whatever their client id); a user-mode daemon,
	// where every job is its user's, goes by ClientID.
	Mine  bool
	Limit int
	// Kind selects jobs, resets or holds; SlurmJobID the holds taken for
	// that Slurm job.
	Kind       string
	SlurmJobID string
	// ArrayID selects the elements of one array (its id or a unique
	// prefix of at least MinIDPrefix characters).
	ArrayID string
}

// JobList answers GET /jobs: the active jobs first (card by card, the
// running one, then the queue in order), then finished ones, newest first.
type JobList struct {
	Jobs []Job `json:"jobs"`
}

// List asks for the jobs q selects.
func (c *Client) List(ctx context.Context, q ListQuery) ([]Job, error) {
	v := url.Values{}
	if q.DeviceID != "" {
		v.Set("device_id", q.DeviceID)
	}
	if q.State != "" {
		v.Set("state", q.State)
	}
	if q.ClientID != "" {
		v.Set("client_id", q.ClientID)
	}
	if q.Mine {
		v.Set("mine", "1")
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Kind != "" {
		v.Set("kind", q.Kind)
	}
	if q.ArrayID != "" {
		v.Set("array_id", q.ArrayID)
	}
	if q.SlurmJobID != "" {
		v.Set("slurm_job_id", q.SlurmJobID)
	}
	path := "/jobs"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var out JobList
	_, err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out.Jobs, err
}
