package cli

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/version"
)

// StatusCmd shows every card as one row of a table, then what needs a
// sentence: dead cards, resets in progress, processes holding a card
// outside the queue, and daemon-wide warnings.
type StatusCmd struct{}

// Run prints the status.
func (s *StatusCmd) Run(a *App) error {
	c, err := a.connect()
	if err != nil {
		return err
	}
	st, err := c.Status(a.ctx)
	if err != nil {
		return a.explain(a.ctx, err)
	}
	if a.JSON {
		return a.printJSON(st)
	}
	writeStatus(a.Out, st, a.url, time.Now(), a.colour())
	if mine := version.String(); st.Version != "" && st.Version != mine {
		a.progress.note("warning: queued runs version %s, this %s is %s; restart queued (make install restarts it when idle) so both are the same build",
			st.Version, Name, mine)
	}
	return nil
}

// cell is one table cell and its colour.
type cell struct{ text, colour string }

// cmdWidth bounds the command shown in the CURRENT column.
const cmdWidth = 32

// writeStatus renders which daemon answered at the address at (see
// daemonLine), the table (see writeTable) and the notes under it.
func writeStatus(w io.Writer, st api.Status, at string, now time.Time, colour bool) {
	fmt.Fprintln(w, termText(daemonLine(st, at)))
	header := []string{"CARD", "STATE", "WORKER", "CURRENT", "OWNER", "RUNTIME", "QUEUED", "EST. WAIT", "LAST RESET", "FOREIGN"}
	rows := [][]cell{}
	var notes []string
	for _, c := range st.Cards {
		row := []cell{{text: c.DeviceID}, {c.State, stateColour(c.State)}}
		worker := cell{text: c.Worker}
		switch {
		case strings.HasPrefix(c.Worker, "paused"):
			worker = cell{"paused", yellow}
		case strings.HasPrefix(c.Worker, "waiting"):
			worker = cell{"waiting", yellow}
		}
		row = append(row, worker)
		if j := c.Current; j != nil {
			what := j.Cmd
			if j.Kind == "reset" {
				what = "(reset)"
			}
			row = append(row, cell{text: shortID(j.ID) + " " + cut(termText(oneLine(what)), cmdWidth)})
			owner := "-"
			if j.Kind != "reset" {
				owner = withAgent(ownerCell(j.Owner, j.OwnerUID, j.ClientID), j.Agent)
			}
			row = append(row, cell{text: owner})
			if j.StartedAt != nil {
				row = append(row, cell{text: fmtDuration(now.Sub(*j.StartedAt))})
			} else {
				row = append(row, cell{text: "-"})
			}
		} else {
			row = append(row, cell{text: "-"}, cell{text: "-"}, cell{text: "-"})
		}
		wait := fmtWait(c.EstimatedWaitSec)
		if j := c.Current; j != nil && j.OverdueSec > 0 {
			wait += " (current overdue)"
		}
		if c.State == "dead" {
			wait = "-"
		}
		row = append(row, cell{text: itoa(len(c.Pending))}, cell{text: wait})
		row = append(row, resetCell(c, now))
		switch {
		case c.ForeignError != "":
			row = append(row, cell{fmt.Sprintf("%d?", len(c.Foreign)), yellow})
		case len(c.Foreign) > 0:
			row = append(row, cell{itoa(len(c.Foreign)), yellow})
		default:
			row = append(row, cell{text: "0"})
		}
		rows = append(rows, row)
		notes = append(notes, cardNotes(c, now)...)
		if modeOf(st).System() {
			notes = append(notes, queueOwners(c)...)
		}
		notes = append(notes, afterNotes(c)...)
	}
	writeTable(w, header, rows, colour)
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, termText(n))
		}
	}
	fmt.Fprintf(w, "\n%d of at most %d jobs queued", st.Queued, st.MaxQueued)
	if st.Stopping {
		fmt.Fprint(w, "; queued is stopping")
	}
	fmt.Fprintln(w)
	if o := st.Output; o.MaxBytes > 0 {
		fmt.Fprintf(w, "output: %s of %s kept (TT_DEVICE_MAX_OUTPUT_BYTES)", fmtBytes(o.Bytes), fmtBytes(o.MaxBytes))
		switch {
		case o.Deleted == 1:
			fmt.Fprint(w, "; 1 finished job's output deleted since start, oldest first")
		case o.Deleted > 1:
			fmt.Fprintf(w, "; %d finished jobs' output deleted since start, oldest first", o.Deleted)
		}
		fmt.Fprintln(w)
	}
	warn := func(format string, args ...any) {
		fmt.Fprintln(w, paint(colour, red, "warning: ")+termText(fmt.Sprintf(format, args...)))
	}
	if p := st.Persistence; !p.OK {
		since := ""
		if p.Since != nil {
			since = " for " + fmtDuration(now.Sub(*p.Since))
		}
		warn("the store cannot be written%s: %s; nothing starts until it can (%d records held in memory, %d retries)",
			since, p.Error, p.HeldRecords, p.Attempts)
	}
	if st.Retention.Warning != "" {
		warn("retention: %s", st.Retention.Warning)
	}
	if st.Output.Warning != "" {
		warn("%s", st.Output.Warning)
	}
	for _, msg := range st.Warnings {
		warn("%s", msg)
	}
}

// writeTable prints a bold header and the rows in aligned columns. Columns
// are padded on the plain text and coloured afterwards, so escape codes
// never break the alignment. A cell's own control characters are escaped
// (termText): it may hold what someone else chose.
func writeTable(w io.Writer, header []string, rows [][]cell, colour bool) {
	widths := make([]int, len(header))
	for i, h := range header {
		widths[i] = len(h)
	}
	for _, r := range rows {
		for i := range r {
			r[i].text = termText(r[i].text)
			widths[i] = max(widths[i], utf8.RuneCountInString(r[i].text))
		}
	}
	line := func(cells []cell) {
		var b strings.Builder
		for i, c := range cells {
			text := c.text
			if i < len(cells)-1 {
				text += strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c.text)+2)
			}
			b.WriteString(paint(colour, c.colour, text))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	hcells := make([]cell, len(header))
	for i, h := range header {
		hcells[i] = cell{h, bold}
	}
	line(hcells)
	for _, r := range rows {
		line(r)
	}
}

func stateColour(state string) string {
	switch state {
	case "healthy":
		return green
	case "dead":
		return red
	default:
		return yellow
	}
}

// resetCell summarizes a card's resets: the pending one, else the last.
func resetCell(c api.CardStatus, now time.Time) cell {
	switch {
	case c.Reset != nil:
		return cell{c.Reset.State + " now", yellow}
	case c.LastReset != nil:
		r := c.LastReset
		text := r.Result + ", " + fmtDuration(now.Sub(r.At)) + " ago"
		if r.Result == "failed" {
			return cell{text, red}
		}
		return cell{text: text}
	default:
		return cell{text: "never"}
	}
}

// cardNotes are the sentences under the table for one card.
func cardNotes(c api.CardStatus, now time.Time) []string {
	var out []string
	card := "card " + c.DeviceID + ": "
	if c.State == "dead" {
		s := card + "dead"
		if c.DeadSince != nil {
			s += " since " + fmtTime(*c.DeadSince, now)
		}
		if c.DeadReason != "" {
			s += ": " + c.DeadReason
		}
		out = append(out, s+"; new jobs are refused until `"+Name+" reset --device "+c.DeviceID+"` revives it")
	}
	if c.State == "unfit" {
		s := card + "unfit"
		if c.UnfitSince != nil {
			s += " since " + fmtTime(*c.UnfitSince, now)
		}
		if c.Reason != "" {
			s += ": " + c.Reason
		}
		out = append(out, s+"; its jobs stay queued until the gate passes again")
	}
	if r := c.Reset; r != nil {
		out = append(out, fmt.Sprintf("%sreset %s %s for %s", card, r.JobID, r.State, fmtDuration(now.Sub(r.At))))
	}
	if c.Rung != "" {
		out = append(out, card+"recovery ladder on the "+termText(c.Rung)+"; each rung is verified by the health check and the gate")
	}
	if c.Recovery != "" {
		out = append(out, card+termText(c.Recovery))
	}
	if r := c.LastReset; r != nil && r.Detail != "" && c.State != "dead" {
		out = append(out, fmt.Sprintf("%slast reset %s %s: %s", card, shortID(r.JobID), r.Result, r.Detail))
	}
	if c.PausedReason != "" && c.State != "dead" && !strings.HasPrefix(c.PausedReason, "card unfit: ") {
		out = append(out, card+"paused: "+c.PausedReason)
	}
	if why, ok := strings.CutPrefix(c.Worker, "waiting: "); ok {
		idle := "idle"
		if c.WaitingSince != nil {
			idle += " " + fmtDuration(now.Sub(*c.WaitingSince))
		}
		out = append(out, card+idle+", waiting: "+why)
	}
	if c.CardType != "" || c.PCIAddress != "" {
		board := strings.TrimSpace(termText(c.CardType + " " + c.Serial))
		if c.ASICID != "" {
			board += " (ASIC " + termText(c.ASICID) + ")"
		}
		out = append(out, card+board+" at PCI "+termText(c.PCIAddress))
	}
	for _, x := range c.CrossCard {
		out = append(out, card+termText(x))
	}
	for _, h := range c.Foreign {
		who := fmt.Sprintf("pid %d %s", h.PID, h.FriendlyName)
		if h.PID == 0 {
			who = "a process outside queued's PID namespace"
		}
		if h.JobID != "" {
			who += " (job " + shortID(h.JobID) + ", not this card's)"
		}
		if h.ClaimedJobID != "" {
			// What its environment says, which anyone can set: shown
			// so the holder can be traced, never as its job.
			who += " (claims job " + termText(shortID(h.ClaimedJobID)) + ", unproven)"
		}
		out = append(out, fmt.Sprintf("%sheld outside the queue by %s: %s", card, who, cut(termText(h.CommandLine), 120)))
	}
	if c.ForeignError != "" {
		out = append(out, card+"holder list may be incomplete: "+c.ForeignError)
	}
	return out
}

// queueOwners is the note saying whose jobs wait in a card's queue, for a
// shared daemon: "card 0: queued for alice (2), bob (1)", in queue order
// of each owner's first job; resets are left out.
func queueOwners(c api.CardStatus) []string {
	var order []string
	count := map[string]int{}
	for _, j := range c.Pending {
		if j.Kind == "reset" {
			continue
		}
		o := ownerCell(j.Owner, j.OwnerUID, j.ClientID)
		if count[o] == 0 {
			order = append(order, o)
		}
		count[o]++
	}
	if len(order) == 0 {
		return nil
	}
	parts := make([]string, len(order))
	for i, o := range order {
		parts[i] = fmt.Sprintf("%s (%d)", o, count[o])
	}
	return []string{"card " + c.DeviceID + ": queued for " + strings.Join(parts, ", ")}
}

// cut shortens s to at most n bytes, marking the cut with "...", and never
// within a character.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= 3
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// oneLine folds a multi-line command onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// fmtBytes prints a size in binary units, such as 1.5 GiB.
func fmtBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(1024), 0
	for m := n / 1024; m >= 1024 && exp < 5; m /= 1024 {
		div *= 1024
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// afterNotes says which queued jobs of a card wait for others to end
// (--after), and so are passed over: "card 0: job 1a2b3c4d waits for
// 5e6f7a8b".
func afterNotes(c api.CardStatus) []string {
	var out []string
	for _, j := range c.Pending {
		if len(j.WaitsFor) > 0 {
			out = append(out, "card "+c.DeviceID+": job "+shortID(j.ID)+" waits for "+shortIDs(j.WaitsFor))
		}
	}
	return out
}
