package smoke

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Step is one step's outcome.
type Step struct {
	Name   string
	OK     bool
	Detail string
	Took   time.Duration
}

// Report is what the smoke test found, short enough to paste into a bug
// report.
type Report struct {
	Card               int
	Device             string
	Host               string
	QueuedVersion      string
	KMDVersion         string
	MetricsURL         string
	Reset, Job, Metric Step
	Passed             bool
}

// WriteText prints the report.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "ttkit smoke test: card %d (%s) on %s\n", r.Card, r.Device, r.Host)
	fmt.Fprintf(&b, "  queued %s, tt-kmd %s, otelcol-tt at %s\n", r.QueuedVersion, r.KMDVersion, r.MetricsURL)
	for _, s := range []Step{r.Reset, r.Job, r.Metric} {
		if s.Name == "" {
			continue
		}
		verdict := "FAIL"
		if s.OK {
			verdict = "ok"
		}
		took := ""
		if s.Took > 0 {
			took = fmt.Sprintf(" (%s)", s.Took.Round(10*time.Millisecond))
		}
		fmt.Fprintf(&b, "  %-10s %-4s %s%s\n", s.Name, verdict, s.Detail, took)
	}
	if r.Passed {
		b.WriteString("PASS\n")
	} else {
		b.WriteString("FAIL\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
