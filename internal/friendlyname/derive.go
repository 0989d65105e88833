package friendlyname

import "strings"

const (
	// unknownName names a command line that is empty after sanitizing.
	unknownName = "<unknown>"
	// pythonCommand names a Python interpreter running a -c program, which has
	// no file or module to be named by.
	pythonCommand = "python -c"
)

// Derive returns the friendly name of a process from its sanitized command
// line, by the rules in the package documentation. It never returns "".
func Derive(commandLine string) string {
	c := cursor{line: commandLine}
	first := c.peek()
	if first == "" {
		return unknownName
	}
	launcher := peel(&c)
	prog := c.next()
	switch {
	case prog != "":
		return program(&c, prog)
	case launcher != "":
		return launcher
	default: // nothing but assignments
		return basename(first)
	}
}

// program names what the program prog runs, given the arguments after it.
func program(c *cursor, prog string) string {
	name := basename(prog)
	switch {
	case isPython(name):
		return python(c, name)
	case isPytest(name):
		return pytest(c, name)
	}
	return name
}

// basename returns the last element of a slash-separated path, ignoring
// trailing slashes; the basename of a run of slashes is "/". Unlike
// path.Base it never cleans, so the result stays a substring of p.
func basename(p string) string {
	trimmed := strings.TrimRight(p, "/")
	if trimmed == "" && p != "" {
		return p[:1]
	}
	return trimmed[strings.LastIndexByte(trimmed, '/')+1:]
}

// cursor walks the space-separated tokens of a command line. Tokens are
// substrings of the line, so walking it allocates nothing. A position may
// also fall inside a token: that is how an option's attached value (env
// -Spython3) is read again as the first of further arguments.
type cursor struct {
	line string
	pos  int // index of the next byte to read
}

// next returns the next token and moves past it, or "" at the end.
func (c *cursor) next() string {
	for c.pos < len(c.line) && c.line[c.pos] == ' ' {
		c.pos++
	}
	start := c.pos
	if end := strings.IndexByte(c.line[start:], ' '); end >= 0 {
		c.pos = start + end
	} else {
		c.pos = len(c.line)
	}
	return c.line[start:c.pos]
}

// peek returns the next token without moving past it.
func (c *cursor) peek() string {
	saved := c.pos
	tok := c.next()
	c.pos = saved
	return tok
}

// isOption reports whether tok is an option to a getopt or argparse parser:
// it starts with '-' and is not the lone "-" that conventionally means stdin.
func isOption(tok string) bool {
	return len(tok) > 1 && tok[0] == '-'
}
