// Package otlptest is an OTLP/HTTP metrics receiver for tests: a real
// HTTP server on 127.0.0.1 that decodes each protobuf
// ExportMetricsServiceRequest with the collector's pmetricotlp and keeps
// the latest one, so a test can drive a real exporter (in process, or a
// daemon it started) and wait, without sleeping, for the values it
// expects. Exports with cumulative temporality carry every stream each
// time, so the latest request is the exporter's whole state.
package otlptest

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
)

// maxBody bounds one request body.
const maxBody = 16 << 20

// Receiver serves POST /v1/metrics.
type Receiver struct {
	// URL is the base URL, for OTEL_EXPORTER_OTLP_ENDPOINT.
	URL string
	srv *httptest.Server

	mu       sync.Mutex
	latest   pmetric.Metrics
	requests int
	err      error         // the first malformed request
	changed  chan struct{} // closed and replaced at every request
}

// Start listens on a free 127.0.0.1 port.
func Start() *Receiver {
	r := &Receiver{latest: pmetric.NewMetrics(), changed: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	r.URL = r.srv.URL
	return r
}

// Close stops the server.
func (r *Receiver) Close() { r.srv.Close() }

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/metrics" {
		http.Error(w, "POST /v1/metrics only", http.StatusNotFound)
		return
	}
	body, err := r.read(req)
	exp := pmetricotlp.NewExportRequest()
	if err == nil {
		err = exp.UnmarshalProto(body)
	}
	r.mu.Lock()
	r.requests++
	if err != nil {
		if r.err == nil {
			r.err = fmt.Errorf("request %d: %w", r.requests, err)
		}
	} else {
		r.latest = exp.Metrics()
	}
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out, _ := pmetricotlp.NewExportResponse().MarshalProto()
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func (r *Receiver) read(req *http.Request) ([]byte, error) {
	var body io.Reader = http.MaxBytesReader(nil, req.Body, maxBody)
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil, fmt.Errorf("gzip body: %w", err)
		}
		body = io.LimitReader(zr, maxBody)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, fmt.Errorf("reading body: %w", err)
	}
	return b, nil
}

// Requests counts the export requests received so far.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// Latest is the last export received (empty before any) and a channel
// that closes at the next one.
func (r *Receiver) Latest() (Snapshot, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Snapshot{r.latest}, r.changed
}

// WaitFor waits until the latest export satisfies cond, or ctx ends; a
// malformed request fails it at once.
func (r *Receiver) WaitFor(ctx context.Context, cond func(Snapshot) bool) (Snapshot, error) {
	for {
		s, changed := r.Latest()
		r.mu.Lock()
		err := r.err
		r.mu.Unlock()
		if err != nil {
			return s, err
		}
		if cond(s) {
			return s, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return s, fmt.Errorf("waiting for metrics after %d requests: %w", r.Requests(), ctx.Err())
		}
	}
}

// Snapshot is one export's metrics.
type Snapshot struct {
	pmetric.Metrics
}

// Resource is a resource attribute of the first resource, "" if absent.
func (s Snapshot) Resource(key string) string {
	if s.ResourceMetrics().Len() == 0 {
		return ""
	}
	v, ok := s.ResourceMetrics().At(0).Resource().Attributes().Get(key)
	if !ok {
		return ""
	}
	return v.AsString()
}

// Metric finds a metric by name.
func (s Snapshot) Metric(name string) (pmetric.Metric, bool) {
	rms := s.ResourceMetrics()
	for i := range rms.Len() {
		sms := rms.At(i).ScopeMetrics()
		for j := range sms.Len() {
			ms := sms.At(j).Metrics()
			for k := range ms.Len() {
				if ms.At(k).Name() == name {
					return ms.At(k), true
				}
			}
		}
	}
	return pmetric.Metric{}, false
}

// Attrs are the exact attributes of the point a lookup wants, values as
// strings (an int attribute 0 is "0").
type Attrs map[string]string

func (a Attrs) match(m pcommon.Map) bool {
	if m.Len() != len(a) {
		return false
	}
	for k, want := range a {
		v, ok := m.Get(k)
		if !ok || v.AsString() != want {
			return false
		}
	}
	return true
}

// Gauge is the value of a gauge's point with exactly attrs.
func (s Snapshot) Gauge(name string, attrs Attrs) (float64, bool) {
	m, ok := s.Metric(name)
	if !ok || m.Type() != pmetric.MetricTypeGauge {
		return 0, false
	}
	return numberPoint(m.Gauge().DataPoints(), attrs)
}

// Sum is the value of a sum's (counter's) point with exactly attrs.
func (s Snapshot) Sum(name string, attrs Attrs) (float64, bool) {
	m, ok := s.Metric(name)
	if !ok || m.Type() != pmetric.MetricTypeSum {
		return 0, false
	}
	return numberPoint(m.Sum().DataPoints(), attrs)
}

func numberPoint(ps pmetric.NumberDataPointSlice, attrs Attrs) (float64, bool) {
	for i := range ps.Len() {
		p := ps.At(i)
		if !attrs.match(p.Attributes()) {
			continue
		}
		if p.ValueType() == pmetric.NumberDataPointValueTypeInt {
			return float64(p.IntValue()), true
		}
		return p.DoubleValue(), true
	}
	return 0, false
}

// Histogram is the count and sum of a histogram's point with exactly
// attrs.
func (s Snapshot) Histogram(name string, attrs Attrs) (count uint64, sum float64, ok bool) {
	m, found := s.Metric(name)
	if !found || m.Type() != pmetric.MetricTypeHistogram {
		return 0, 0, false
	}
	ps := m.Histogram().DataPoints()
	for i := range ps.Len() {
		if p := ps.At(i); attrs.match(p.Attributes()) {
			return p.Count(), p.Sum(), true
		}
	}
	return 0, 0, false
}

// Unit is a metric's unit, "" when the metric is absent.
func (s Snapshot) Unit(name string) string {
	m, ok := s.Metric(name)
	if !ok {
		return ""
	}
	return m.Unit()
}
