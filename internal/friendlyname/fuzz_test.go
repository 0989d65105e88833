package friendlyname

import (
	"strings"
	"testing"
)

// FuzzDerive checks the invariants the tt_process labels rely on: the name
// is never empty, fits the 256-byte label bound, is one token (or part of
// one) of the command line it came from, and depends on nothing else.
func FuzzDerive(f *testing.F) {
	for _, tc := range deriveCases {
		f.Add(tc.line)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		Derive(raw) // any string at all must be safe to pass
		line := sanitize(raw)
		got := Derive(line)
		switch {
		case got == "":
			t.Fatalf("Derive(%q) is empty", line)
		case len(got) > 256:
			t.Fatalf("Derive(%q) is %d bytes long", line, len(got))
		case got != Derive(line):
			t.Fatalf("Derive(%q) is not deterministic", line)
		case got == unknownName:
			if strings.Trim(line, " ") != "" {
				t.Fatalf("Derive(%q) = %q for a line with tokens", line, got)
			}
		case got == pythonCommand:
			// Only a Python interpreter given -c (alone or in a cluster
			// such as -uc) earns the name. The interpreter may be the
			// value of env's -S, which env splits into the command:
			// env -Spython -c0 runs python -c 0; and that value may be
			// a -S again, which env splits once more: env -S-Spython
			// -c0 runs python -c 0 too.
			if !anyToken(line, func(tok string) bool {
				for v := tok; v != ""; v = splitStringValue(v) {
					if isPython(basename(v)) {
						return true
					}
				}
				return false
			}) ||
				!anyToken(line, func(tok string) bool {
					return isOption(tok) && !strings.HasPrefix(tok, "--") && strings.Contains(tok, "c")
				}) {
				t.Fatalf("Derive(%q) = %q without a Python interpreter and a -c", line, got)
			}
		case got == pytestName && !strings.Contains(line, pytestName):
			// py.test is named pytest, run as a command or as a module
			// (-m py.test, -mpy.test).
			if !strings.Contains(line, "py.test") {
				t.Fatalf("Derive(%q) = %q without any pytest", line, got)
			}
		case !strings.Contains(line, got) || strings.Contains(got, " "):
			t.Fatalf("Derive(%q) = %q, which is not part of one of its tokens", line, got)
		}
	})
}

// splitStringValue is the value attached to env's -S in tok (alone, -Sv,
// or ending a cluster of short options, -iSv) or to a long option
// (--split-string=v, or an abbreviation of it), which env reads as
// arguments of its own; "" when tok carries none.
func splitStringValue(tok string) string {
	switch {
	case strings.HasPrefix(tok, "--"):
		_, v, _ := strings.Cut(tok, "=")
		return v
	case strings.HasPrefix(tok, "-"):
		if i := strings.IndexByte(tok, 'S'); i > 0 {
			return tok[i+1:]
		}
	}
	return ""
}

// anyToken reports whether some space-separated token of line satisfies ok.
func anyToken(line string, ok func(string) bool) bool {
	for _, tok := range strings.Fields(line) {
		if ok(tok) {
			return true
		}
	}
	return false
}

// sanitize does to a raw /proc/<pid>/cmdline what procscan does before it
// calls Derive: NUL separators become spaces, trailing spaces go, every byte
// outside printable ASCII is dropped, and the rest is cut to 256 bytes.
func sanitize(raw string) string {
	raw = strings.TrimRight(strings.ReplaceAll(raw, "\x00", " "), " ")
	var b strings.Builder
	for i := 0; i < len(raw) && b.Len() < 256; i++ {
		if c := raw[i]; 0x20 <= c && c <= 0x7e {
			b.WriteByte(c)
		}
	}
	return b.String()
}
