// Package friendlyname derives the friendly name a tt_process metric carries:
// the script, module, test file or binary a process is actually running,
// lifted out of its command line.
//
// Reporting the executable alone would not do: every job run through the same
// interpreter would read as python3, and an absolute path into a virtualenv
// says nothing about what is running. Derive applies four rules, in order:
//
//  1. Launcher prefixes are peeled: leading NAME=value assignments and sudo,
//     env, nohup, stdbuf, taskset, numactl, timeout, nice and ionice (matched
//     on the token's basename), each with its own options and operands read
//     the way the tool itself reads them ("taskset -c 0-3 timeout 600
//     python3 run.py" is run.py). A launcher that runs no command (nothing
//     left after it, or taskset -p, ionice -p, --help) is named by itself.
//  2. A Python interpreter (python, python3, python3.12, pypy3, python3.13t,
//     ...) is looked past: -c gives the literal "python -c", -m mod gives the
//     module name with its dots, otherwise the first positional argument's
//     basename (the script or console entry point). An interpreter with
//     nothing to run, or reading its program from stdin (-), keeps its name.
//  3. pytest, run as pytest, py.test or pytest-3, as python -m pytest, or as
//     a Python script of that name, is named by its first test target: the
//     basename of the part before the first "::" (a/b/test_x.py::TestC::test_y
//     gives test_x.py, a/b/c/ gives c). Options are skipped with their values,
//     including -k and -m expressions whose quotes the kernel did not keep.
//     An option of a plugin or conftest (--device-id 0) is unknown, and may
//     have taken the next token as its value: that token is the target only
//     if it looks like one (a node ID, a .py file, a directory with its
//     trailing slash); else a later target is preferred, then such a token
//     holding a slash. With no target it is named pytest, however invoked.
//  4. Anything else is the basename of its first token. A basename drops
//     trailing slashes; the basename of a run of slashes is "/".
//
// The result is a single token, or part of one, lifted straight out of the
// command line, never anything invented, so it inherits the command line's
// bounds (printable ASCII, at most 256 bytes) and can never disagree with the
// command_line label. There are three exceptions: "python -c", "pytest" for a
// py.test or pytest-3 run without a target, and "<unknown>" for a command line
// that is empty or only spaces.
//
// Derive expects the command line as procscan sanitizes it: NUL separators
// turned into spaces, only bytes 0x20-0x7E, at most 256 bytes. Tokens are what
// lies between spaces, so an argument that contained a space reads as two,
// as it does in ps. A process whose command line is empty (a kernel thread, a
// zombie) is named by procscan from its comm value as-is, without Derive:
// comm is not a command line, and taking a basename would turn kworker/0:1
// into 0:1.
//
// Nothing here knows any particular project's programs, modules or
// directories; the only names recognized are the launchers, python and
// pytest, so Derive behaves the same on any host. It does no I/O and, working
// on substrings of its input, allocates nothing.
package friendlyname
