package udev

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// rule is one udev rule line: its matches (==) and its assignments (= or
// :=), each by key.
type rule struct {
	match  map[string]string
	assign map[string]string
	final  map[string]bool // assigned with :=, which no later rule changes
}

var pair = regexp.MustCompile(`^\s*([A-Z_]+(?:\{[^}]*\})?)\s*(==|!=|:=|\+=|=)\s*"([^"]*)"\s*$`)

// parse reads a rules file as udev does: one rule a line, comments and
// blank lines skipped, comma-separated KEY op "value" pairs; anything
// else fails the test.
func parse(t *testing.T, path string) []rule {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rules []rule
	for i, line := range strings.Split(string(b), "\n") {
		if s := strings.TrimSpace(line); s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		r := rule{match: map[string]string{}, assign: map[string]string{}, final: map[string]bool{}}
		for _, p := range strings.Split(line, ",") {
			m := pair.FindStringSubmatch(p)
			if m == nil {
				t.Fatalf("%s:%d: %q is not KEY op \"value\"", path, i+1, p)
			}
			switch m[2] {
			case "==":
				r.match[m[1]] = m[3]
			case ":=", "=":
				r.assign[m[1]], r.final[m[1]] = m[3], m[2] == ":="
			default:
				t.Fatalf("%s:%d: unexpected operator %s", path, i+1, m[2])
			}
		}
		rules = append(rules, r)
	}
	return rules
}

// The shipped rule (make install-system ENFORCE=1) makes every card node
// 0600 root:root, finally (:=), so tt-kmd's MODE="0666" cannot win
// whichever file udev reads last (issue 44).
func TestRule_CardNodesAdmitRootOnly(t *testing.T) {
	rules := parse(t, "60-tenstorrent-queued.rules")
	if len(rules) != 1 {
		t.Fatalf("%d rules, want 1", len(rules))
	}
	r := rules[0]
	if r.match["SUBSYSTEM"] != "tenstorrent" {
		t.Errorf("matches %v, want SUBSYSTEM==\"tenstorrent\"", r.match)
	}
	for key, want := range map[string]string{"MODE": "0600", "OWNER": "root", "GROUP": "root"} {
		if r.assign[key] != want || !r.final[key] {
			t.Errorf("%s: %q (final %v), want %s:=%q", key, r.assign[key], r.final[key], key, want)
		}
	}
}
