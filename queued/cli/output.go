package cli

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// printJSON writes v as one line of JSON, the only thing --json prints.
func (a *App) printJSON(v any) error {
	enc := json.NewEncoder(a.Out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return &Error{Code: ExitRefused, Err: fmt.Errorf("writing JSON: %w", err)}
	}
	return nil
}

// println prints a line for people on stdout, its control characters
// escaped (see termLines): its arguments may be what someone else chose.
func (a *App) println(format string, args ...any) {
	fmt.Fprintln(a.Out, termLines(fmt.Sprintf(format, args...)))
}

// fields prints name/value lines with the values aligned.
type fields [][2]string

// add adds a line whose value is shown on one line, its control
// characters escaped (termText): a value may be what someone else chose.
func (f *fields) add(name, format string, args ...any) {
	*f = append(*f, [2]string{name, termText(fmt.Sprintf(format, args...))})
}

// addLines adds a line whose value keeps its newlines, each further line
// indented under the value (a multi-line command); its other control
// characters are escaped.
func (f *fields) addLines(name, format string, args ...any) {
	*f = append(*f, [2]string{name, termLines(fmt.Sprintf(format, args...))})
}

func (a *App) printFields(f fields) {
	tw := tabwriter.NewWriter(a.Out, 0, 0, 2, ' ', 0)
	for _, kv := range f {
		fmt.Fprintf(tw, "%s\t%s\n", kv[0], strings.ReplaceAll(kv[1], "\n", "\n\t"))
	}
	tw.Flush()
}

// fmtTime prints a time in local time with how long ago it was.
func fmtTime(t time.Time, now time.Time) string {
	return fmt.Sprintf("%s (%s ago)", t.Local().Format("2006-01-02 15:04:05"), fmtDuration(now.Sub(t)))
}

// ANSI colours for states, used only when colour is on.
const (
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	red    = "\x1b[31m"
	bold   = "\x1b[1m"
	reset  = "\x1b[0m"
)

// paint wraps s in an ANSI colour when on is set.
func paint(on bool, colour, s string) string {
	if !on || colour == "" {
		return s
	}
	return colour + s + reset
}

func itoa(n int) string     { return strconv.Itoa(n) }
func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
