package friendlyname

import "strings"

// pytestOptions is the option syntax of pytest and of the plugins commonly
// run with it (xdist, cov, timeout, rerunfailures, html, repeat, randomly,
// split). Only options that take a value need listing: any other is a flag.
var pytestOptions = grammar{
	valueShorts: "kmpcoWrn",
	longs: []longOption{
		// pytest itself
		{"assert", needsValue}, {"basetemp", needsValue}, {"cache-show", greedyValue},
		{"capture", needsValue}, {"code-highlight", needsValue}, {"color", needsValue},
		{"confcutdir", needsValue}, {"config-file", needsValue}, {"debug", greedyValue},
		{"deselect", needsValue}, {"doctest-glob", needsValue}, {"doctest-report", needsValue},
		{"durations", needsValue}, {"durations-min", needsValue}, {"ignore", needsValue},
		{"ignore-glob", needsValue}, {"import-mode", needsValue}, {"junit-prefix", needsValue},
		{"junit-xml", needsValue}, {"junitprefix", needsValue}, {"junitxml", needsValue},
		{"last-failed-no-failures", needsValue}, {"lfnf", needsValue}, {"log-auto-indent", needsValue},
		{"log-cli-date-format", needsValue}, {"log-cli-format", needsValue},
		{"log-cli-level", needsValue}, {"log-date-format", needsValue}, {"log-disable", needsValue},
		{"log-file", needsValue}, {"log-file-date-format", needsValue},
		{"log-file-format", needsValue}, {"log-file-level", needsValue}, {"log-file-mode", needsValue},
		{"log-format", needsValue}, {"log-level", needsValue}, {"maxfail", needsValue},
		{"override-ini", needsValue}, {"pastebin", needsValue}, {"pdbcls", needsValue},
		{"pythonwarnings", needsValue}, {"rootdir", needsValue}, {"show-capture", needsValue},
		{"tb", needsValue}, {"verbosity", needsValue},
		// plugins
		{"alluredir", needsValue}, {"count", needsValue}, {"cov", greedyValue},
		{"cov-config", needsValue}, {"cov-context", needsValue}, {"cov-fail-under", needsValue},
		{"cov-report", needsValue}, {"css", needsValue}, {"dist", needsValue},
		{"durations-path", needsValue}, {"group", needsValue}, {"html", needsValue},
		{"max-worker-restart", needsValue}, {"maxprocesses", needsValue},
		{"maxschedchunk", needsValue}, {"numprocesses", needsValue}, {"only-rerun", needsValue},
		{"randomly-seed", needsValue}, {"repeat-scope", needsValue}, {"report-log", needsValue},
		{"rerun-except", needsValue}, {"reruns", needsValue}, {"reruns-delay", needsValue},
		{"rsyncdir", needsValue}, {"rsyncignore", needsValue}, {"session-timeout", needsValue},
		{"splits", needsValue}, {"splitting-algorithm", needsValue}, {"timeout", needsValue},
		{"timeout-method", needsValue}, {"timeout_method", needsValue}, {"tx", needsValue},
	},
}

// pytestName names a pytest run that has no test target, however pytest
// was invoked (pytest, py.test, pytest-3): one name for one program.
const pytestName = "pytest"

// isPytest reports whether name, a program's basename or a module, is
// pytest: pytest, py.test, or a distribution's versioned pytest-3 or
// pytest-3.11.
func isPytest(name string) bool {
	if name == "pytest" || name == "py.test" {
		return true
	}
	version, ok := strings.CutPrefix(name, "pytest-")
	return ok && version != "" && strings.Trim(version, "0123456789.") == "" && version[0] != '.'
}

// pytest names a pytest run by its first test target, given the arguments
// after the program, script or module; with no target it is pytestName.
//
// Options are read with pytestOptions, but a project's conftest and
// plugins add options of their own (--device-id 0, --benchmark-json
// out.json) that no table can know, and the spec forbids knowing them. So a
// long option not in the table may have taken the next token as its value:
// that token is the target only if it looks like one (see looksLikeTarget);
// otherwise it is skipped, and if it at least holds a slash it is kept as
// the name for a run where no other target follows.
func pytest(c *cursor, _ string) string {
	fallback := ""
	maybeValue := false
	for {
		tok := c.next()
		if tok == "--" {
			tok, maybeValue = c.next(), false
		} else if isOption(tok) {
			opt := pytestOptions.scan(c, tok)
			if opt.name == "k" || opt.name == "m" {
				skipExpression(c, opt.value)
			}
			maybeValue = opt == (option{}) && strings.HasPrefix(tok, "--") && !strings.Contains(tok, "=")
			continue
		}
		switch {
		case tok == "" && fallback != "":
			return testTarget(fallback)
		case tok == "":
			return pytestName
		case maybeValue && !looksLikeTarget(tok):
			if fallback == "" && strings.Contains(tok, "/") {
				fallback = tok
			}
			maybeValue = false
			continue
		}
		return testTarget(tok)
	}
}

// looksLikeTarget reports whether tok is unmistakably a test target rather
// than an option's value: a node ID (a/test_x.py::test_y), a Python file,
// or a directory written with its trailing slash.
func looksLikeTarget(tok string) bool {
	path, _, nodeID := strings.Cut(tok, "::")
	return nodeID || strings.HasSuffix(path, ".py") || strings.HasSuffix(path, "/")
}

// testTarget names a test target by the basename of its part before the
// first "::": a/b/test_x.py::TestC::test_y[p] is test_x.py, a/b/c/ is c.
func testTarget(target string) string {
	path, _, _ := strings.Cut(target, "::")
	if name := basename(path); name != "" {
		return name
	}
	return basename(target)
}

// skipExpression moves c past the rest of a -k or -m expression whose first
// word is first. The kernel keeps no quotes, so -k "a and not (b or c)"
// arrives as the words -k a and not (b or c): after an operand, an "and" or
// "or" joins another; an operand is any number of "not", then a word, then
// whatever words it takes to close the parentheses that word opened.
func skipExpression(c *cursor, first string) {
	word := strings.TrimPrefix(first, "=") // argparse reads -k=expr as -k expr
	for {
		for word == "not" {
			word = c.next()
		}
		for depth := parenDepth(word); depth > 0 && word != ""; depth += parenDepth(word) {
			word = c.next()
		}
		if next := c.peek(); word == "" || next != "and" && next != "or" {
			return
		}
		c.next()
		word = c.next()
	}
}

// parenDepth returns how many more parentheses word opens than it closes.
func parenDepth(word string) int {
	return strings.Count(word, "(") - strings.Count(word, ")")
}
