package friendlyname

import "strings"

// pythonOptions is CPython's option syntax (PyPy's adds --jit and --info).
// -c and -m end the options; CPython itself takes no "--opt=value", but a
// value after '=' is read as one here all the same.
var pythonOptions = grammar{
	valueShorts: "cmWX",
	stopShorts:  "hV?",
	longs: []longOption{
		{"check-hash-based-pycs", needsValue}, {"jit", needsValue},
		{"help", stops}, {"help-all", stops}, {"help-env", stops}, {"help-xoptions", stops},
		{"info", stops}, {"version", stops},
	},
}

// isPython reports whether name is a Python interpreter's: python or pypy,
// then an optional version of digits and dots, then optional ABI flags
// (python3, python3.12, pypy3, python3.13t, python3.12d).
func isPython(name string) bool {
	version, ok := strings.CutPrefix(name, "python")
	if !ok {
		version, ok = strings.CutPrefix(name, "pypy")
	}
	if !ok || version == "" {
		return ok
	}
	if !isDigit(version[0]) {
		return false
	}
	abiFlags := strings.TrimLeft(version, "0123456789.")
	return strings.Trim(abiFlags, "dmut") == ""
}

// python names what the interpreter called interpreter runs, given the
// arguments after it: the literal "python -c", a module, or a script.
func python(c *cursor, interpreter string) string {
	for {
		tok := c.next()
		if tok == "--" {
			return pythonScript(c, c.next(), interpreter)
		}
		if !isOption(tok) {
			return pythonScript(c, tok, interpreter)
		}
		opt := pythonOptions.scan(c, tok)
		switch {
		case opt.kind == stops:
			return interpreter
		case opt.name != "c" && opt.name != "m":
		case opt.value == "": // -c or -m with nothing after it runs nothing
			return interpreter
		case opt.name == "c":
			return pythonCommand
		case isPytest(opt.value):
			return pytest(c, opt.value)
		default:
			return opt.value
		}
	}
}

// pythonScript names the script at path that the interpreter runs, with the
// arguments after it; no path, or "-" for stdin, leaves the interpreter.
func pythonScript(c *cursor, path, interpreter string) string {
	if path == "" || path == "-" {
		return interpreter
	}
	name := basename(path)
	if isPytest(name) {
		return pytest(c, name)
	}
	return name
}
