package smoke

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxMetricsBytes bounds one scrape of the metrics endpoint.
const maxMetricsBytes = 16 << 20

// watchMetrics scrapes otelcol-tt until it reports a tt_process series for
// pid, or MetricsWait passes. The series must carry the friendly name want.
func watchMetrics(ctx context.Context, o Options, pid int, want string) Step {
	s := Step{Name: "otelcol-tt"}
	start := time.Now()
	deadline := start.Add(o.MetricsWait)
	client := &http.Client{Timeout: 5 * time.Second}
	var last string
	for {
		series, err := scrape(ctx, client, o.MetricsURL)
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("%d tt_process series, none with pid %d", countProcess(series), pid)
			for _, sr := range series {
				if sr.name != "tt_process" || sr.labels["pid"] != strconv.Itoa(pid) {
					continue
				}
				s.Took = time.Since(start)
				if got := sr.labels["friendly_name"]; got != want {
					s.Detail = fmt.Sprintf("pid %d is reported, but named %q, not %q (command_line %q)", pid, got, want, sr.labels["command_line"])
					return s
				}
				s.OK = true
				s.Detail = fmt.Sprintf("tt_process{pid=%q, friendly_name=%q, hostname=%q}", sr.labels["pid"], want, sr.labels["hostname"])
				return s
			}
		}
		if time.Now().After(deadline) {
			s.Took = time.Since(start)
			s.Detail = fmt.Sprintf("no tt_process series for pid %d at %s within %s (last scrape: %s)", pid, o.MetricsURL, o.MetricsWait, last)
			return s
		}
		select {
		case <-ctx.Done():
			s.Detail = ctx.Err().Error()
			return s
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func countProcess(series []sample) int {
	n := 0
	for _, s := range series {
		if s.name == "tt_process" {
			n++
		}
	}
	return n
}

func scrape(ctx context.Context, c *http.Client, url string) ([]sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("bad metrics URL %q: %w", url, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxMetricsBytes))
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	return parseExposition(string(b)), nil
}

// sample is one line of the Prometheus text format: a metric name and its
// labels (the value is not needed).
type sample struct {
	name   string
	labels map[string]string
}

// parseExposition reads the samples of the Prometheus text format,
// skipping comments and any line it cannot read.
func parseExposition(text string) []sample {
	var out []sample
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if s, ok := parseSample(line); ok {
			out = append(out, s)
		}
	}
	return out
}

func parseSample(line string) (sample, bool) {
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return sample{}, false
	}
	s := sample{name: line[:i], labels: map[string]string{}}
	if line[i] != '{' {
		return s, true
	}
	rest := line[i+1:]
	for {
		rest = strings.TrimLeft(rest, " ,")
		if strings.HasPrefix(rest, "}") {
			return s, true
		}
		eq := strings.Index(rest, `="`)
		if eq <= 0 {
			return sample{}, false
		}
		name := strings.TrimSpace(rest[:eq])
		rest = rest[eq+2:]
		var v strings.Builder
		closed := false
		for j := 0; j < len(rest); j++ {
			ch := rest[j]
			if ch == '\\' && j+1 < len(rest) {
				j++
				switch rest[j] {
				case 'n':
					v.WriteByte('\n')
				default:
					v.WriteByte(rest[j])
				}
				continue
			}
			if ch == '"' {
				rest, closed = rest[j+1:], true
				break
			}
			v.WriteByte(ch)
		}
		if !closed {
			return sample{}, false
		}
		s.labels[name] = v.String()
	}
}
