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

// isPytest reports whether name, a program's basename or a module, is pytest.
func isPytest(name string) bool {
	return name == "pytest" || name == "py.test"
}

// pytest names a pytest run by its first test target, given the arguments
// after the program, script or module self; with no target it is self.
func pytest(c *cursor, self string) string {
	for {
		tok := c.next()
		if tok == "--" {
			tok = c.next()
		} else if isOption(tok) {
			if opt := pytestOptions.scan(c, tok); opt.name == "k" || opt.name == "m" {
				skipExpression(c, opt.value)
			}
			continue
		}
		if tok == "" {
			return self
		}
		return testTarget(tok)
	}
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
