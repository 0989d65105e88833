package friendlyname

import "strings"

// grammar is the option syntax of one program, in the terms getopt_long (and
// argparse, and CPython's own parser, which agree on what matters here) uses.
// A short option that takes a value takes the rest of its token (-n7, -uWerror)
// or, when nothing is left of it, the next token (-n 7, -um mod); letters
// before it in a cluster are flags. A long option's value follows '=' or, when
// the option needs one, is the next token. Options in neither set are flags,
// unknown ones included: the point is to get past them, not to validate them.
type grammar struct {
	valueShorts    string // short options that take a value
	optionalShorts string // short options that take a value only when attached (sudo -hhost)
	restShorts     string // short options whose value is read again as further arguments (env -S)
	stopShorts     string // short options after which the program runs no command
	longs          []longOption
	abbreviations  bool // getopt_long accepts a unique prefix of a long name; argparse (as pytest sets it up) and CPython do not
}

// longOption is one long option, named without its leading "--".
type longOption struct {
	name string
	kind argKind
}

// argKind says whether an option takes a value and what it means.
type argKind uint8

const (
	noValue       argKind = iota // a flag
	needsValue                   // --user=alice or --user alice
	optionalValue                // getopt's optional_argument: a value only after '=' (--preserve-env=LIST)
	greedyValue                  // argparse's nargs='?': --cov=src, --cov src, or a bare --cov before another option
	restValue                    // env --split-string: the value is read again as further arguments
	stops                        // --help, --version, taskset --pid: the program runs no command
)

// option is what one option token, with any value it took, amounted to.
type option struct {
	name  string // the long name, or the short letter that took a value; "" for flags only
	value string // a substring of the command line ending where the cursor now stands
	kind  argKind
}

// scan reads the option token tok (already taken from c) and any value it
// takes from the tokens after it.
func (g *grammar) scan(c *cursor, tok string) option {
	if strings.HasPrefix(tok, "--") {
		return g.scanLong(c, tok[2:])
	}
	for i := 1; i < len(tok); i++ {
		letter, attached := tok[i:i+1], tok[i+1:]
		switch {
		case strings.Contains(g.optionalShorts, letter) && attached != "":
			return option{name: letter, value: attached, kind: needsValue}
		case strings.Contains(g.stopShorts, letter):
			return option{name: letter, kind: stops}
		case strings.Contains(g.valueShorts, letter):
			return option{name: letter, value: valueOf(c, attached), kind: needsValue}
		case strings.Contains(g.restShorts, letter):
			return option{name: letter, value: valueOf(c, attached), kind: restValue}
		}
	}
	return option{}
}

// scanLong reads a long option whose text after "--" is body.
func (g *grammar) scanLong(c *cursor, body string) option {
	name, value, attached := strings.Cut(body, "=")
	long, ok := g.long(name)
	if !ok {
		return option{}
	}
	switch {
	case attached && long.kind != noValue:
	case long.kind == needsValue || long.kind == restValue:
		value = c.next()
	case long.kind == greedyValue && !isOption(c.peek()):
		value = c.next()
	default:
		value = ""
	}
	return option{name: long.name, value: value, kind: long.kind}
}

// long finds the long option called name, or, where the grammar allows
// abbreviations, the only one whose name starts with it.
func (g *grammar) long(name string) (longOption, bool) {
	var found longOption
	matches := 0
	for _, long := range g.longs {
		if long.name == name {
			return long, true
		}
		if g.abbreviations && name != "" && strings.HasPrefix(long.name, name) {
			found = long
			matches++
		}
	}
	return found, matches == 1
}

// valueOf returns an option's attached value, or else the next token.
func valueOf(c *cursor, attached string) string {
	if attached != "" {
		return attached
	}
	return c.next()
}
