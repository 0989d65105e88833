package procscan

import "strings"

// MaxCommandLine is the longest command line, in bytes, that [Sanitize]
// returns. Command lines become Prometheus label values and a process chooses
// its own, so they are bounded.
const MaxCommandLine = 256

// Unknown is the friendly name and command line of a process whose command
// line is empty once sanitized (for example one made only of control bytes).
// It is the value friendlyname.Derive gives for an empty command line.
const Unknown = "<unknown>"

// Sanitize renders the raw bytes of /proc/<pid>/cmdline as a label-safe
// command line, in the order DESIGN.md fixes: NUL separators become spaces,
// trailing NULs and spaces are trimmed, every byte outside printable ASCII
// (0x20-0x7E) is dropped, and the result is cut to [MaxCommandLine] bytes.
// Leading spaces, and trailing ones left behind by a dropped byte or by the
// cut, are trimmed too, so a label never begins or ends in blank space and a
// line of nothing but control bytes is empty. It returns "" when nothing is left; callers render
// that as [Unknown].
//
// Like ps, the rendering is not reversible: an argument containing a space
// cannot be told from two arguments.
func Sanitize(raw []byte) string { return sanitize(raw, ' ') }

// ArgSpace stands for a space inside one argument in the command line that
// Options.Redact is given: NUL separators become spaces, so without it an
// argument such as "correct horse" could not be told from two, and a
// pattern ending in \S+ would redact only its first word. It is not
// printable, so no command line holds it otherwise; it is turned back into
// a space after redaction.
const ArgSpace = '\x1f'

// RedactedMark is what Options.Redact is expected to put in place of a
// secret. A token holding it is never the friendly name when the command
// line has another to offer.
const RedactedMark = "***"

// sanitize is Sanitize, writing a space inside an argument as argSpace.
func sanitize(raw []byte, argSpace byte) string {
	end := len(raw)
	for end > 0 && (raw[end-1] == 0 || raw[end-1] == ' ') {
		end--
	}
	var out strings.Builder
	out.Grow(min(end, MaxCommandLine))
	for _, c := range raw[:end] {
		if out.Len() == MaxCommandLine {
			break
		}
		switch {
		case out.Len() == 0 && (c == 0 || c == ' '):
			// Leading blanks (an empty argv[0], or one of only
			// non-printable bytes) are trimmed like trailing ones.
		case c == 0:
			out.WriteByte(' ')
		case c == ' ':
			out.WriteByte(argSpace)
		case c >= 0x20 && c <= 0x7e:
			out.WriteByte(c)
		}
	}
	return strings.TrimRight(out.String(), " "+string(rune(argSpace)))
}
