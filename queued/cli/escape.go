package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/ttkit/ttkit/queued/api"
)

// What the CLI prints for people may come from other people: another
// user's command, working directory, environment or client id in list,
// status and job; a job's error, which names its directory; a daemon's
// message that echoes a field. A terminal obeys the control characters in
// it: ESC and C1 sequences clear the screen, recolour it, set its title,
// write the clipboard or, on some terminals, type into it. So every such
// text is printed as ps prints command lines, with C0 controls, DEL, C1
// controls (U+0080-U+009F, as UTF-8 and as raw bytes), the
// bidirectional-text controls (bidiControl) and bytes that are not UTF-8
// made visible as escapes: \n, \t, \r, \x1b, \u009b, \u202e, \xff. A
// backslash is printed as it is, so the escapes show the characters, not
// an exact copy: --json prints every field exactly.
//
// A job's output is the job's own stream, printed byte for byte (see
// outputWriter for the one exception).

// termText is s made safe for a terminal on one line: every control
// character escaped, newlines and tabs included.
func termText(s string) string { return escapeControls(s, "") }

// termLines is termText for text shown on several lines (a multi-line
// command, a message): newlines are kept.
func termLines(s string) string { return escapeControls(s, "\n") }

// escapeControls escapes what a terminal would act on in s, except the
// characters in keep.
func escapeControls(s, keep string) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if needsEscape(r, n, keep) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if needsEscape(r, n, keep) {
			writeEscape(&b, s[i:i+n], r)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// needsEscape reports whether the rune r, n bytes long, is a C0 or C1
// control, DEL, a bidirectional-text control or a byte that is not
// UTF-8, and not in keep.
func needsEscape(r rune, n int, keep string) bool {
	switch {
	case r == utf8.RuneError && n == 1:
		return true
	case r < 0x20 || (r >= 0x7f && r <= 0x9f):
		return !strings.ContainsRune(keep, r)
	}
	return bidiControl(r)
}

// bidiControl reports whether r reorders or breaks the text around it
// when a terminal lays the line out: the embeddings and overrides
// (U+202A-U+202E), the isolates (U+2066-U+2069), the marks (U+200E,
// U+200F, U+061C) and the line and paragraph separators (U+2028,
// U+2029). A right-to-left override in another user's command makes it
// read as something else than what runs ("Trojan Source"); printed as an
// escape it reads as what it is.
func bidiControl(r rune) bool {
	switch {
	case r == 0x061c, r == 0x200e, r == 0x200f:
		return true
	case r >= 0x2028 && r <= 0x202e:
		return true
	case r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// writeEscape writes the escape of raw, which decoded as r.
func writeEscape(b *strings.Builder, raw string, r rune) {
	switch {
	case r == '\n':
		b.WriteString(`\n`)
	case r == '\t':
		b.WriteString(`\t`)
	case r == '\r':
		b.WriteString(`\r`)
	case len(raw) == 1:
		fmt.Fprintf(b, `\x%02x`, raw[0])
	default:
		fmt.Fprintf(b, `\u%04x`, r)
	}
}

// outputKeep are the control characters another user's output keeps on
// a terminal: its line layout.
const outputKeep = "\n\t\r"

// termWriter escapes what it writes as termLines does, keeping newlines,
// tabs and carriage returns, for another user's output shown on a
// terminal (see outputWriter). A character split between two writes is
// held until the next; Flush writes what is held.
type termWriter struct {
	w    io.Writer
	held []byte
}

// Write escapes p and writes it, holding back the start of a character
// that p ends within.
func (t *termWriter) Write(p []byte) (int, error) {
	buf := append(t.held, p...)
	cut := len(buf)
	// Hold an incomplete UTF-8 sequence at the end (at most 3 bytes).
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-3; i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				cut = i
			}
			break
		}
	}
	t.held = append([]byte(nil), buf[cut:]...)
	if _, err := io.WriteString(t.w, escapeControls(string(buf[:cut]), outputKeep)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes a character left incomplete at the end, escaped.
func (t *termWriter) Flush() error {
	if len(t.held) == 0 {
		return nil
	}
	s := escapeControls(string(t.held), outputKeep)
	t.held = nil
	_, err := io.WriteString(t.w, s)
	return err
}

// outputWriter is where a job's output is printed, and the flush to call
// once it is: stdout, byte for byte, since the output is the job's own
// stream; but when stdout is a terminal and the job is another user's (an
// admin reading someone's output on a shared queued), through a
// termWriter, so that user's escape sequences cannot drive the terminal.
// Piped, it is exact whoever reads it.
func (a *App) outputWriter(j api.Job) (io.Writer, func() error) {
	if a.JSON || !othersOutput(j) || !isTerminal(a.Out) {
		return a.Out, func() error { return nil }
	}
	t := &termWriter{w: a.Out}
	return t, t.Flush
}

// othersOutput reports whether j's output is another user's: a job (not
// a reset, whose output is the host's reset commands') whose recorded
// owner is not this process's user. A user-mode daemon records no owner:
// every job is its user's.
func othersOutput(j api.Job) bool {
	return j.Kind != "reset" && j.OwnerUID != nil && int64(*j.OwnerUID) != int64(os.Getuid())
}
