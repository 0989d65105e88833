package friendlyname

import "strings"

// launcher is a program that runs another command: its friendly name is the
// command's, not its own. Its options are read as the tool reads them
// (coreutils, util-linux, sudo and numactl all use getopt_long with a leading
// '+': options end at the first operand), so that an option's value is never
// mistaken for the command.
type launcher struct {
	name        string
	options     grammar
	operands    int  // operands between the options and the command: taskset's mask, timeout's duration
	assignments bool // NAME=VALUE operands (any token with '=') come before the command, as for env
	special     special
}

// special names the tokens a launcher reads, at the place of an option,
// outside getopt. (A kind rather than a func field: calling through a func
// value would move the cursor to the heap.)
type special uint8

const (
	getoptOnly  special = iota // no token outside getopt
	sudoArgs                   // VAR=value operands mixed with the options; -h host
	envDash                    // a lone "-", which implies -i and ends the options
	niceNumbers                // the historical adjustments -N, --N and -+N
)

// step is what a launcher's special reading of a token decided.
type step uint8

const (
	notSpecial   step = iota // getopt reads the token as usual
	nextOption               // the token (and any value) was read; options go on
	endOfOptions             // the token was read and ended the options
	noCommand                // the launcher runs no command
)

// launchers are the standard shell launchers, with the options and operands
// of the tools' current releases (sudo 1.9, coreutils 9, util-linux 2.41,
// numactl 2.0.19).
var launchers = []launcher{
	{name: "sudo", special: sudoArgs, options: grammar{
		valueShorts: "aCcDgpRrTtUu", optionalShorts: "h", stopShorts: "eKlVvh", abbreviations: true,
		longs: []longOption{
			{"askpass", noValue}, {"auth-type", needsValue}, {"background", noValue}, {"bell", noValue},
			{"chdir", needsValue}, {"chroot", needsValue}, {"close-from", needsValue},
			{"command-timeout", needsValue}, {"edit", stops}, {"group", needsValue}, {"help", stops},
			{"host", needsValue}, {"list", stops}, {"login", noValue}, {"login-class", needsValue},
			{"no-update", noValue}, {"non-interactive", noValue}, {"other-user", needsValue},
			{"preserve-env", optionalValue}, {"preserve-groups", noValue}, {"prompt", needsValue},
			{"remove-timestamp", stops}, {"reset-timestamp", noValue}, {"role", needsValue},
			{"set-home", noValue}, {"shell", noValue}, {"stdin", noValue}, {"type", needsValue},
			{"user", needsValue}, {"validate", stops}, {"version", stops},
		},
	}},
	{name: "env", assignments: true, special: envDash, options: grammar{
		valueShorts: "aCu", restShorts: "S", abbreviations: true,
		longs: []longOption{
			{"argv0", needsValue}, {"block-signal", optionalValue}, {"chdir", needsValue},
			{"debug", noValue}, {"default-signal", optionalValue}, {"ignore-environment", noValue},
			{"ignore-signal", optionalValue}, {"list-signal-handling", noValue}, {"null", noValue},
			{"split-string", restValue}, {"unset", needsValue}, {"help", stops}, {"version", stops},
		},
	}},
	{name: "nohup", options: grammar{
		abbreviations: true,
		longs:         []longOption{{"help", stops}, {"version", stops}},
	}},
	{name: "stdbuf", options: grammar{
		valueShorts: "ioe", abbreviations: true,
		longs: []longOption{
			{"input", needsValue}, {"output", needsValue}, {"error", needsValue},
			{"help", stops}, {"version", stops},
		},
	}},
	{name: "taskset", operands: 1, options: grammar{
		stopShorts: "phV", abbreviations: true,
		longs: []longOption{
			{"all-tasks", noValue}, {"cpu-list", noValue}, {"pid", stops}, {"help", stops}, {"version", stops},
		},
	}},
	{name: "numactl", options: grammar{
		valueShorts: "iwpPcNCmSfoLMI", stopShorts: "sH", abbreviations: true,
		longs: []longOption{
			{"all", noValue}, {"interleave", needsValue}, {"weighted-interleave", needsValue},
			{"preferred", needsValue}, {"preferred-many", needsValue}, {"cpubind", needsValue},
			{"cpunodebind", needsValue}, {"physcpubind", needsValue}, {"membind", needsValue},
			{"show", stops}, {"localalloc", noValue}, {"balancing", noValue}, {"hardware", stops},
			{"shm", needsValue}, {"file", needsValue}, {"offset", needsValue}, {"length", needsValue},
			{"strict", noValue}, {"shmmode", needsValue}, {"dump", noValue}, {"dump-nodes", noValue},
			{"shmid", needsValue}, {"huge", noValue}, {"touch", noValue}, {"cpu-compress", noValue},
			{"verify", noValue}, {"version", stops},
		},
	}},
	{name: "timeout", operands: 1, options: grammar{
		valueShorts: "ks", abbreviations: true,
		longs: []longOption{
			{"foreground", noValue}, {"kill-after", needsValue}, {"preserve-status", noValue},
			{"signal", needsValue}, {"verbose", noValue}, {"help", stops}, {"version", stops},
		},
	}},
	{name: "nice", special: niceNumbers, options: grammar{
		valueShorts: "n", abbreviations: true,
		longs: []longOption{{"adjustment", needsValue}, {"help", stops}, {"version", stops}},
	}},
	{name: "ionice", options: grammar{
		valueShorts: "cn", stopShorts: "pPuhV", abbreviations: true,
		longs: []longOption{
			{"class", needsValue}, {"classdata", needsValue}, {"ignore", noValue},
			{"pid", stops}, {"pgid", stops}, {"uid", stops}, {"help", stops}, {"version", stops},
		},
	}},
}

// peel moves c past leading assignments and launchers, and returns the
// basename of the last launcher it passed ("" if none). When a launcher runs
// no command, c is left at the end of the line.
func peel(c *cursor) string {
	last := ""
	for {
		start := c.pos
		tok := c.next()
		if isAssignment(tok) {
			continue
		}
		l := findLauncher(basename(tok))
		if l == nil {
			c.pos = start
			return last
		}
		last = basename(tok)
		if !l.skip(c) {
			c.pos = len(c.line)
			return last
		}
	}
}

// findLauncher returns the launcher called name, or nil.
func findLauncher(name string) *launcher {
	for i := range launchers {
		if launchers[i].name == name {
			return &launchers[i]
		}
	}
	return nil
}

// skip moves c past the launcher's options, operands and assignments, to
// its command. It reports false when the launcher runs no command.
func (l *launcher) skip(c *cursor) bool {
	if !l.skipOptions(c) {
		return false
	}
	for range l.operands {
		c.next()
	}
	for l.assignments {
		start := c.pos
		if !strings.Contains(c.next(), "=") {
			c.pos = start
			break
		}
	}
	return true
}

// skipOptions moves c past the launcher's options. It reports false when an
// option means the launcher runs no command.
func (l *launcher) skipOptions(c *cursor) bool {
	for {
		start := c.pos
		tok := c.next()
		if tok == "--" {
			return true
		}
		switch l.readSpecial(c, tok) {
		case nextOption:
			continue
		case endOfOptions:
			return true
		case noCommand:
			return false
		}
		if !isOption(tok) {
			c.pos = start
			return true
		}
		switch opt := l.options.scan(c, tok); opt.kind {
		case stops:
			return false
		case restValue: // read the value again, as env -S splits it into arguments
			c.pos -= len(opt.value)
		}
	}
}

// readSpecial reads tok if it is one of the launcher's special tokens.
func (l *launcher) readSpecial(c *cursor, tok string) step {
	switch l.special {
	case sudoArgs:
		return sudoSpecial(c, tok)
	case envDash:
		if tok == "-" {
			return endOfOptions
		}
	case niceNumbers:
		if isNiceNumber(tok) {
			return nextOption
		}
	}
	return notSpecial
}

// sudoSpecial reads what sudo reads outside getopt: VAR=value operands mixed
// with the options, and -h followed by a host name (a bare -h asks for help).
func sudoSpecial(c *cursor, tok string) step {
	switch {
	case isSudoEnvar(tok):
		return nextOption
	case tok != "-h":
		return notSpecial
	}
	if host := c.peek(); host != "" && host[0] != '-' && !isSudoEnvar(host) {
		c.next()
		return nextOption
	}
	return noCommand
}

// isSudoEnvar reports whether sudo takes the operand tok for an environment
// variable: it contains '=' and starts with none of '/', '=' and '-'.
func isSudoEnvar(tok string) bool {
	return tok != "" && strings.IndexByte("/=-", tok[0]) < 0 && strings.Contains(tok, "=")
}

// isNiceNumber reports whether tok is one of nice's historical adjustments
// -N, --N and -+N, which nice recognizes before getopt sees them.
func isNiceNumber(tok string) bool {
	if len(tok) < 2 || tok[0] != '-' {
		return false
	}
	digit := 1
	if tok[1] == '-' || tok[1] == '+' {
		digit = 2
	}
	return digit < len(tok) && isDigit(tok[digit])
}

// isAssignment reports whether tok is a shell assignment NAME=value, NAME
// being a shell identifier.
func isAssignment(tok string) bool {
	name, _, ok := strings.Cut(tok, "=")
	if !ok || name == "" || isDigit(name[0]) {
		return false
	}
	for i := 0; i < len(name); i++ {
		if b := name[i]; b != '_' && !isDigit(b) && !isLetter(b) {
			return false
		}
	}
	return true
}

func isDigit(b byte) bool  { return '0' <= b && b <= '9' }
func isLetter(b byte) bool { return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' }
