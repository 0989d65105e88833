package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/ttkit/ttkit/queued/api"
)

// watchFrame is what one screen of watch shows: the daemon's status as
// last read, the running jobs' last output lines, and the feed's error,
// if the last read failed (the view keeps the last good status under it).
type watchFrame struct {
	at    string // which daemon answered (App.url)
	st    *api.Status
	tails map[string][]string // job id -> its last output lines
	err   error
	now   time.Time
	// width and height bound the screen; 0 means unbounded (plain text).
	width, height int
}

// watchLine is one line of the view and how it is painted. Lines are cut
// to the width before they are painted, so a cut never splits an escape.
type watchLine struct {
	text  string
	style string // "", "title", "healthy", "bad", "warn", "dim"
}

// watchStyles paints watchLines; its renderer decides whether colour is
// used at all (NO_COLOR and plain output get termenv.Ascii: no escapes).
type watchStyles map[string]lipgloss.Style

// newWatchStyles returns the styles for renderer r, colourless when
// colour is false.
func newWatchStyles(r *lipgloss.Renderer, colour bool) watchStyles {
	if !colour {
		r.SetColorProfile(termenv.Ascii)
	}
	return watchStyles{
		"title":   r.NewStyle().Bold(true),
		"healthy": r.NewStyle().Foreground(lipgloss.Color("2")).Bold(true),
		"bad":     r.NewStyle().Foreground(lipgloss.Color("1")).Bold(true),
		"warn":    r.NewStyle().Foreground(lipgloss.Color("3")).Bold(true),
		"dim":     r.NewStyle().Faint(true),
	}
}

// render draws the frame: a title line, then per card its state (and
// fitness), the running job or hold with its owner and elapsed time, the
// job's last output lines, its queue and the processes holding it
// outside the queue; the daemon's warnings last. Lines past the height
// are dropped with a line saying how many.
func (f watchFrame) render(s watchStyles) string {
	lines := f.lines()
	if f.height > 0 && len(lines) > f.height {
		more := len(lines) - f.height + 1
		lines = append(lines[:f.height-1], watchLine{fmt.Sprintf("... %d more lines (a taller terminal shows them)", more), "dim"})
	}
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		text := l.text
		if f.width > 0 {
			text = cutWidth(text, f.width)
		}
		if st, ok := s[l.style]; ok && l.style != "" {
			text = st.Render(text)
		}
		b.WriteString(text)
	}
	return b.String()
}

// lines is the frame's content before it is fitted to the screen.
func (f watchFrame) lines() []watchLine {
	title := "tt-device-queue watch  " + f.now.UTC().Format("15:04:05") + " UTC"
	if f.height > 0 {
		title += "  (q quits)"
	}
	out := []watchLine{{termText(title), "title"}}
	if f.err != nil {
		out = append(out, watchLine{termText("cannot read queued's status: " + oneLine(f.err.Error())), "bad"})
	}
	if f.st == nil {
		return append(out, watchLine{"waiting for queued's first answer...", "dim"})
	}
	out = append(out, watchLine{termText(daemonLine(*f.st, f.at)), "dim"})
	for _, c := range f.st.Cards {
		out = append(out, watchLine{})
		out = append(out, f.card(c)...)
	}
	if len(f.st.Warnings) > 0 {
		out = append(out, watchLine{})
		for _, w := range f.st.Warnings {
			out = append(out, watchLine{termText("warning: " + oneLine(w)), "warn"})
		}
	}
	return out
}

// card is one card's block of lines.
func (f watchFrame) card(c api.CardStatus) []watchLine {
	style := "warn"
	switch c.State {
	case "healthy":
		style = "healthy"
	case "dead":
		style = "bad"
	}
	head := "card " + c.DeviceID + "  " + c.State
	if c.CardType != "" {
		head += "  " + c.CardType
	}
	if c.Reason != "" {
		head += "  (" + oneLine(c.Reason) + ")"
	}
	out := []watchLine{{termText(head), style}}
	if j := c.Current; j != nil {
		out = append(out, watchLine{termText("  " + f.current(*j)), ""})
		for _, l := range f.tails[j.ID] {
			out = append(out, watchLine{"  | " + termText(l), "dim"})
		}
	} else {
		out = append(out, watchLine{"  idle", "dim"})
	}
	if len(c.Pending) == 0 {
		out = append(out, watchLine{"  queue: empty", "dim"})
	} else {
		out = append(out, watchLine{fmt.Sprintf("  queue: %d, est. wait %s", len(c.Pending), fmtWait(c.EstimatedWaitSec)), ""})
		for _, j := range c.Pending {
			out = append(out, watchLine{termText("    " + pendingLine(j)), ""})
		}
	}
	for _, h := range c.Foreign {
		out = append(out, watchLine{termText(fmt.Sprintf("  held outside the queue by pid %d %s", h.PID, cut(oneLine(h.FriendlyName+" "+h.CommandLine), 80))), "warn"})
	}
	if c.ForeignError != "" {
		out = append(out, watchLine{termText("  holders unknown: " + oneLine(c.ForeignError)), "warn"})
	}
	for _, n := range cardNotes(c, f.now) {
		out = append(out, watchLine{termText("  " + n), "dim"})
	}
	return out
}

// current describes the card's running job, hold or reset.
func (f watchFrame) current(j api.JobSummary) string {
	elapsed := "-"
	if j.StartedAt != nil {
		elapsed = fmtDuration(f.now.Sub(*j.StartedAt))
	}
	switch j.Kind {
	case "reset":
		return "resetting (" + shortID(j.ID) + ", " + elapsed + ")"
	case "hold":
		return "held by " + ownerCell(j.Owner, j.OwnerUID, j.ClientID) + " for " + elapsed + " (hold " + shortID(j.ID) + ")"
	}
	return "running " + shortID(j.ID) + "  " + ownerCell(j.Owner, j.OwnerUID, j.ClientID) + "  " + elapsed + "  " + cut(oneLine(j.Cmd), 60)
}

// pendingLine is one queued job: its place, id, owner and command (or
// that it is a hold or a reset), and what it waits for.
func pendingLine(j api.JobSummary) string {
	what := cut(oneLine(j.Cmd), 60)
	if j.Kind == "hold" || j.Kind == "reset" {
		what = "(" + j.Kind + ")"
	}
	s := fmt.Sprintf("%d. %s  %s  %s", j.Position, shortID(j.ID), ownerCell(j.Owner, j.OwnerUID, j.ClientID), what)
	if w := waitsFor(j); w != "" {
		s += "  (waits for " + w + ")"
	}
	return s
}

// waitsFor says what a queued job waits for besides its turn. It is the
// one place where the view will show a job's dependencies (issue 43,
// --after) once the status carries them; until then it is empty.
func waitsFor(api.JobSummary) string { return "" }

// cutWidth shortens s to at most n terminal cells.
func cutWidth(s string, n int) string {
	if lipgloss.Width(s) <= n {
		return s
	}
	r := []rune(s)
	for len(r) > 0 && lipgloss.Width(string(r)) > n {
		r = r[:len(r)-1]
	}
	return string(r)
}

// tailLines returns the last n complete or partial lines of b, each as
// a terminal would show it after carriage returns.
func tailLines(b []byte, n int) []string {
	s := strings.TrimRight(string(b), "\n")
	if s == "" || n <= 0 {
		return nil
	}
	all := strings.Split(s, "\n")
	if len(all) > n {
		all = all[len(all)-n:]
	}
	for i, l := range all {
		// A progress bar redraws its line after each \r: the terminal
		// would show the text after the last one.
		l = strings.TrimRight(l, "\r")
		if k := strings.LastIndexByte(l, '\r'); k >= 0 {
			l = l[k+1:]
		}
		all[i] = l
	}
	return all
}
