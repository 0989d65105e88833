package cli

import (
	"bytes"
	"testing"
)

func TestTermText(t *testing.T) {
	for _, tc := range []struct{ in, text, lines string }{
		{"python3 train.py --lr 0.1", "python3 train.py --lr 0.1", "python3 train.py --lr 0.1"},
		{"héllo wörld ✓", "héllo wörld ✓", "héllo wörld ✓"},
		{"sleep 5 #\x1b[2J\x1b[31mFAKE\x1b]0;title\a", `sleep 5 #\x1b[2J\x1b[31mFAKE\x1b]0;title\x07`, `sleep 5 #\x1b[2J\x1b[31mFAKE\x1b]0;title\x07`},
		{"a\nb\tc\rd\x00e\x7f", `a\nb\tc\rd\x00e\x7f`, "a\nb\\tc\\rd\\x00e\\x7f"},
		{"C1 as UTF-8: \u009b31m \u0085 \u0080\u009f", `C1 as UTF-8: \u009b31m \u0085 \u0080\u009f`, `C1 as UTF-8: \u009b31m \u0085 \u0080\u009f`},
		{"raw C1 \x9b31m, not UTF-8 \xff\xfe, cut \xe2\x82", `raw C1 \x9b31m, not UTF-8 \xff\xfe, cut \xe2\x82`, `raw C1 \x9b31m, not UTF-8 \xff\xfe, cut \xe2\x82`},
		{`a literal \x1b stays`, `a literal \x1b stays`, `a literal \x1b stays`},
		{"bidi: ls \u202e3pm.sh\u202c \u2066x\u2069 \u200e\u200f\u061c \u202a\u202b\u202d \u2028\u2029", `bidi: ls \u202e3pm.sh\u202c \u2066x\u2069 \u200e\u200f\u061c \u202a\u202b\u202d \u2028\u2029`, `bidi: ls \u202e3pm.sh\u202c \u2066x\u2069 \u200e\u200f\u061c \u202a\u202b\u202d \u2028\u2029`},
		{"\u00a0 and U+00A0 on are printable", "\u00a0 and U+00A0 on are printable", "\u00a0 and U+00A0 on are printable"},
	} {
		if got := termText(tc.in); got != tc.text {
			t.Errorf("termText(%q) = %q, want %q", tc.in, got, tc.text)
		}
		if got := termLines(tc.in); got != tc.lines {
			t.Errorf("termLines(%q) = %q, want %q", tc.in, got, tc.lines)
		}
		if got := termText(termText(tc.in)); got != tc.text {
			t.Errorf("termText is not idempotent on %q: %q", tc.in, got)
		}
	}
}

// termWriter escapes a stream written in pieces that split characters,
// keeping the line layout.
func TestTermWriter(t *testing.T) {
	in := []byte("ok ✓ \u009b \x1b[31mred\r\n\ttab \x9b \xff end é")
	want := "ok ✓ \\u009b \\x1b[31mred\r\n\ttab \\x9b \\xff end é"
	for size := 1; size <= len(in); size++ {
		var out bytes.Buffer
		w := &termWriter{w: &out}
		for i := 0; i < len(in); i += size {
			if _, err := w.Write(in[i:min(i+size, len(in))]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Fatalf("pieces of %d: %q, want %q", size, out.String(), want)
		}
	}
	var out bytes.Buffer
	w := &termWriter{w: &out}
	w.Write([]byte("cut \xe2\x82"))
	w.Flush()
	if out.String() != `cut \xe2\x82` {
		t.Fatalf("an incomplete character at the end: %q", out.String())
	}
}
