package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client talks to queued. Every method takes a context; long-polls add
// their wait to whatever deadline the context has.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// Connection settings of the client's transport.
const (
	// maxIdlePerHost keeps a connection for each of this many concurrent
	// callers sharing one Client (a bench or a script with many waits)
	// instead of net/http's default 2, which makes the rest dial again
	// for every request.
	maxIdlePerHost = 64
	// idleTimeout drops an unused connection before the daemon's own
	// 2-minute idle timeout can close it under a request.
	idleTimeout = 90 * time.Second
	// dialTimeout bounds connecting; the daemon is normally on loopback,
	// where a connection is made at once or refused.
	dialTimeout = 5 * time.Second
	// responseHeaderTimeout bounds the wait for an answer to start. A
	// long-poll answers within MaxWait once it has a handler, and the
	// daemon gives up finding a handler after 30 seconds, twice at most;
	// beyond that the daemon is stuck. Callers bound whole calls with
	// their context.
	responseHeaderTimeout = MaxWait + 2*time.Minute
)

// NewClient returns a client for the daemon at baseURL (such as
// http://127.0.0.1:5741) with the token from its state directory (see ReadToken).
// One Client is safe for concurrent use and keeps a connection for each
// of up to 64 concurrent callers. It connects to baseURL directly, never
// through a proxy from the environment, so the token goes nowhere else,
// and it follows no redirect: the daemon never sends one, and a request
// sent on elsewhere could run twice.
func NewClient(baseURL, token string) *Client {
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          maxIdlePerHost,
		MaxIdleConnsPerHost:   maxIdlePerHost,
		IdleConnTimeout:       idleTimeout,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: responseHeaderTimeout,
		// The daemon never compresses; output bytes must arrive as sent.
		DisableCompression: true,
	}
	hc := &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, http: hc}
}

// Close releases the client's idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Error is an answer with a 3xx, 4xx or 5xx status; Message is the
// daemon's own words. Classify with errors.As and StatusCode.
type Error struct {
	StatusCode int
	Message    string
	// NotQueued is set when the answer did not come from queued at all
	// (not its JSON): something else listens at the address.
	NotQueued bool
	// bound is HeaderBusyBound of a busy 503: see BusyError.
	bound string
}

func (e *Error) Error() string {
	return fmt.Sprintf("queued answered %d %s: %s", e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// BusyError is a 503 queued gave at one of its HTTP bounds (the answer
// names it in HeaderBusyBound): nothing was done for the request, so the
// client sent it again, with a growing pause, BusyRetries times, and
// gives up with this. Classify with errors.As; Unwrap gives the *Error.
type BusyError struct {
	// Bound is the setting that bounds what was busy, such as
	// TT_DEVICE_HTTP_WORKERS_PER_USER.
	Bound string
	// Tries is how many times the request was sent, over Waited.
	Tries  int
	Waited time.Duration
	Err    *Error
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("%v (gave up after %d tries over %s)", e.Err, e.Tries, e.Waited.Round(100*time.Millisecond))
}

// Unwrap gives the daemon's answer.
func (e *BusyError) Unwrap() error { return e.Err }

// BusyRetries is how many times a request refused busy at a bound (see
// BusyError) is sent again before the client gives up, after pauses of
// busyBackoff, twice as long each time (or the answer's Retry-After, if
// longer): about 7.5 s in all, on top of the daemon's own wait for a slot.
const BusyRetries = 3

// busyBackoff is the first pause before a busy request is sent again.
const busyBackoff = 500 * time.Millisecond

// IsStatus reports whether err is an *Error with the given status code.
func IsStatus(err error, code int) bool {
	var e *Error
	return errors.As(err, &e) && e.StatusCode == code
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) (*http.Response, error) {
	return c.doAccept(ctx, method, path, "", body, out)
}

// doAccept is do with an Accept header, when accept is not empty.
func (c *Client) doAccept(ctx context.Context, method, path, accept string, body, out any) (*http.Response, error) {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return nil, fmt.Errorf("encoding request: %w", err)
		}
	}
	began, pause := time.Now(), busyBackoff
	for tries := 1; ; tries++ {
		resp, retryAfter, err := c.send(ctx, method, path, accept, b, body != nil, out)
		var e *Error
		if err == nil || !errors.As(err, &e) || e.bound == "" {
			return resp, err
		}
		if tries > BusyRetries {
			return nil, &BusyError{Bound: e.bound, Tries: tries, Waited: time.Since(began), Err: e}
		}
		t := time.NewTimer(max(pause, retryAfter))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, &BusyError{Bound: e.bound, Tries: tries, Waited: time.Since(began), Err: e}
		case <-t.C:
		}
		pause *= 2
	}
}

// send sends one request; a busy 503 (see BusyError) comes back as an
// *Error with its bound, and its Retry-After.
func (c *Client) send(ctx context.Context, method, path, accept string, b []byte, hasBody bool, out any) (*http.Response, time.Duration, error) {
	var rd io.Reader
	if hasBody {
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, 0, fmt.Errorf("building request: %w", err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if hasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		defer drainClose(resp.Body)
		var e ErrorResponse
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			// Not one of queued's JSON errors: say so rather than print
			// whatever page answered.
			return nil, 0, &Error{StatusCode: resp.StatusCode, NotQueued: true,
				Message: fmt.Sprintf("the server at %s is not queued: it answered %s with %d bytes of %q", c.base, resp.Status, len(b), resp.Header.Get("Content-Type"))}
		}
		ae := &Error{StatusCode: resp.StatusCode, Message: e.Error}
		if resp.StatusCode == http.StatusServiceUnavailable {
			ae.bound = resp.Header.Get(HeaderBusyBound)
		}
		retryAfter, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return nil, time.Duration(min(max(retryAfter, 0), 30)) * time.Second, ae
	}
	if out == nil {
		return resp, 0, nil
	}
	defer drainClose(resp.Body)
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return nil, 0, &Error{StatusCode: resp.StatusCode, NotQueued: true,
			Message: fmt.Sprintf("the server at %s is not queued: its answer to %s %s is not queued's JSON (%v)", c.base, method, path, err)}
	}
	return resp, 0, nil
}

// drainClose reads what is left of an answer (the decoder stops at the
// end of the JSON value, before a chunked body's last chunk) and closes
// it, so the connection goes back to the idle pool instead of being
// closed. It reads at most 64 KiB: a longer rest is not worth keeping the
// connection for.
func drainClose(body io.ReadCloser) {
	io.Copy(io.Discard, io.LimitReader(body, 64<<10))
	body.Close()
}

// Queue submits a job.
func (c *Client) Queue(ctx context.Context, req QueueRequest) (QueueResponse, error) {
	var out QueueResponse
	_, err := c.do(ctx, http.MethodPost, "/queue", req, &out)
	return out, err
}

// Hold asks for a hold of req.DeviceID's cards; see HoldRequest.
func (c *Client) Hold(ctx context.Context, req HoldRequest) (HoldResponse, error) {
	var out HoldResponse
	_, err := c.do(ctx, http.MethodPost, "/hold", req, &out)
	return out, err
}

// Release ends a hold, or every live hold taken for a Slurm job; see
// ReleaseRequest.
func (c *Client) Release(ctx context.Context, req ReleaseRequest) (ReleaseResponse, error) {
	var out ReleaseResponse
	_, err := c.do(ctx, http.MethodPost, "/release", req, &out)
	return out, err
}

// Resubmit queues a copy of a job (see ResubmitRequest); the copy runs as
// the job's owner, whoever asks.
func (c *Client) Resubmit(ctx context.Context, req ResubmitRequest) (QueueResponse, error) {
	var out QueueResponse
	_, err := c.do(ctx, http.MethodPost, "/resubmit", req, &out)
	return out, err
}

// Reset schedules card resets: of req.DeviceID, of the card req.JobID ran
// on, or of every card when both are empty. It returns at once; the
// answer names each card's reset job, or why it was skipped.
func (c *Client) Reset(ctx context.Context, req ResetRequest) (ResetResponse, error) {
	var out ResetResponse
	_, err := c.do(ctx, http.MethodPost, "/reset", req, &out)
	return out, err
}

// Status returns every card's state and queue.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var out Status
	_, err := c.do(ctx, http.MethodGet, "/status", nil, &out)
	return out, err
}

// Job returns a job by id or unique prefix.
func (c *Client) Job(ctx context.Context, id string) (Job, error) {
	var out Job
	_, err := c.do(ctx, http.MethodGet, "/job/"+url.PathEscape(id), nil, &out)
	return out, err
}

// JobBrief is Job without the spec: the record as Jobs lists it (a
// preview of the command, no environment), with the job's place in its
// queue. It is what a client asks again and again while it waits, and
// costs the daemon the same whatever the job's command and environment
// take (Job reads them whole from the store).
func (c *Client) JobBrief(ctx context.Context, id string) (Job, error) {
	var out Job
	_, err := c.do(ctx, http.MethodGet, "/job/"+url.PathEscape(id)+"?brief=1", nil, &out)
	return out, err
}

// Kill stops a job: a queued one at once, a running one with SIGINT and,
// after the grace period, SIGKILL. An empty id is refused here: the
// daemon would take it as no id, and stop the caller's running job
// (KillRunning does that on purpose).
func (c *Client) Kill(ctx context.Context, id string) (Job, error) {
	if strings.TrimSpace(id) == "" {
		return Job{}, errors.New("kill: no job id (KillRunning stops the caller's running job)")
	}
	var out Job
	_, err := c.do(ctx, http.MethodPost, "/kill", KillRequest{JobID: id}, &out)
	return out, err
}

// NothingRunningError is KillRunning's error when the caller has no
// running job to stop. Running lists the running jobs of the cards asked
// about that are someone else's.
type NothingRunningError struct {
	Running []Job
}

func (e *NothingRunningError) Error() string { return NothingRunningMessage }

// KillRunning stops the caller's running job, as kill without an id does
// in the Python tt-device-queue: on deviceID's card when it is not empty,
// else on any card; clientID (may be empty) picks among several. It
// returns *NothingRunningError when the caller has no running job, and a
// 409 *Error naming them when it has several.
func (c *Client) KillRunning(ctx context.Context, deviceID, clientID string) (Job, error) {
	var raw json.RawMessage
	if _, err := c.do(ctx, http.MethodPost, "/kill", KillRequest{DeviceID: deviceID, ClientID: clientID}, &raw); err != nil {
		return Job{}, err
	}
	var j Job
	if err := json.Unmarshal(raw, &j); err != nil || j.ID == "" {
		var none NothingRunning
		if err := json.Unmarshal(raw, &none); err != nil || none.Error == "" {
			return Job{}, &Error{StatusCode: http.StatusOK, NotQueued: true,
				Message: fmt.Sprintf("the server at %s is not queued: its answer to POST /kill is neither a job nor an error", c.base)}
		}
		return Job{}, &NothingRunningError{Running: none.Running}
	}
	return j, nil
}

// Result returns the job's record, waiting up to wait (at most MaxWait)
// for it to be done. Check Done on the answer.
func (c *Client) Result(ctx context.Context, id string, wait time.Duration) (Job, error) {
	var out Job
	_, err := c.do(ctx, http.MethodGet, "/result/"+url.PathEscape(id)+"?wait="+seconds(min(wait, MaxWait)), nil, &out)
	return out, err
}

// WaitResult asks for the result again and again until the job is done or
// ctx ends.
func (c *Client) WaitResult(ctx context.Context, id string) (Job, error) {
	for {
		j, err := c.Result(ctx, id, MaxWait)
		if err != nil || j.Done() {
			return j, err
		}
	}
}

// LogsQuery selects a chunk of output.
type LogsQuery struct {
	// Offset is the byte offset to read from.
	Offset int64
	// Limit bounds the chunk; 0 means DefaultLogChunk.
	Limit int64
	// Wait, if set, waits (at most MaxWait) for output past Offset or
	// the job's end.
	Wait time.Duration
}

// Logs reads a chunk of a job's output.
func (c *Client) Logs(ctx context.Context, id string, q LogsQuery) (LogChunk, error) {
	v := url.Values{}
	v.Set("offset", strconv.FormatInt(q.Offset, 10))
	if q.Limit > 0 {
		v.Set("limit", strconv.FormatInt(q.Limit, 10))
	}
	if q.Wait > 0 {
		v.Set("wait", seconds(min(q.Wait, MaxWait)))
	}
	resp, err := c.doAccept(ctx, http.MethodGet, "/logs/"+url.PathEscape(id)+"?"+v.Encode(), RawOutput, nil, nil)
	if err != nil {
		return LogChunk{}, err
	}
	defer drainClose(resp.Body)
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxLogChunk+1))
	if err != nil {
		return LogChunk{}, fmt.Errorf("reading output: %w", err)
	}
	h := resp.Header
	num := func(name string) int64 { n, _ := strconv.ParseInt(h.Get(name), 10, 64); return n }
	return LogChunk{
		Offset: num(HeaderLogOffset), NextOffset: num(HeaderLogNext), Size: num(HeaderLogSize),
		State: h.Get(HeaderJobState), Done: h.Get(HeaderLogDone) == "true", Data: data,
	}, nil
}

// Follow copies a job's output from offset to w as it is produced, using
// long-polls, until the job is done and all output is copied or ctx ends.
// It returns the offset reached.
func (c *Client) Follow(ctx context.Context, id string, offset int64, w io.Writer) (int64, error) {
	for {
		ch, err := c.Logs(ctx, id, LogsQuery{Offset: offset, Limit: MaxLogChunk, Wait: MaxWait})
		if err != nil {
			return offset, err
		}
		if _, err := w.Write(ch.Data); err != nil {
			return offset, fmt.Errorf("writing output: %w", err)
		}
		offset = ch.NextOffset
		if ch.Done {
			return offset, nil
		}
	}
}

func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}
