package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/config"
)

// QueuePythonCmd submits a Python script so that it runs as `python3
// SCRIPT ARGS` would in the submitter's shell: a file runs from its own
// path (sys.path[0] is its directory, __file__ its absolute path), so the
// modules beside it import, and "." is put first on the job's PYTHONPATH,
// as the Python tt-device-queue does, so those of the directory the job
// runs in (the submitting directory by default) import too. With --snapshot, or when the script comes from
// stdin (-), the script is first copied into the state directory
// (scripts/, mode 0600), so later edits do not change the queued job; a
// snapshot still runs as its original path (see snapshotBoot), and stdin
// runs as `python3 -` does, with the job's working directory on sys.path.
// A copy is removed if the submission fails, and copies older than
// TT_DEVICE_RETENTION_DAYS are pruned whenever a new one is written.
type QueuePythonCmd struct {
	Submission
	Python       *string  `placeholder:"INTERPRETER" help:"Python interpreter to run the script with (default: the active virtual environment's or conda environment's python3, else ~/tenstorrent/.venv/bin/python3 when present, else python3 from the job's PATH)."`
	PythonOption []string `name:"python-option" sep:"none" placeholder:"OPTION" help:"Option for the interpreter, placed before the script, given as --python-option=-u; repeat for more."`
	PythonArg    []string `name:"python-arg" sep:"none" placeholder:"ARG" help:"Argument for the script, placed after it, as in the Python tt-device-queue (--python-arg x1 runs python3 SCRIPT x1); repeat for more. The same as ARGs after the script; give one or the other."`
	Snapshot     bool     `help:"Run the script as it is now: later edits to the file do not change the queued job. Imports, __file__ and sys.path[0] stay those of the file's own path."`
	Wait         bool     `help:"Wait like run: show the position, stream the output and exit with the script's status."`
	WaitTimeout  Duration `placeholder:"DURATION" help:"With --wait, stop waiting after this long (seconds, or such as 10m) and exit 124; the job goes on. 0 (the default) waits without limit."`
	OutputLimit  int64    `placeholder:"BYTES" help:"With --wait, print only the first this many bytes of the output, as the Python tt-device-queue did, and say where the rest is. 0 (the default) prints all of it."`
	Script       string   `arg:"" placeholder:"SCRIPT" help:"The script file, or - to read it from stdin."`
	Args         []string `arg:"" optional:"" placeholder:"ARG" help:"Arguments for the script."`
}

// ScriptsDir is where queue-python keeps scripts, inside the state
// directory.
const ScriptsDir = "scripts"

// maxScriptBytes bounds a script read from a file or stdin.
const maxScriptBytes = 16 << 20

// snapshotBoot runs a stored copy of a script as if the original file ran:
// `python -c snapshotBoot COPY ORIGINAL ARGV0 ARGS...` puts the original's
// directory where `python ORIGINAL` puts it (sys.path[0], unless -P or -I
// asked for no such entry), sets __file__ to the original's absolute path
// and sys.argv to ARGV0 ARGS..., and runs the copy's code in __main__ under
// the original's name (tracebacks name the original). It leaves no name of
// its own in __main__.
const snapshotBoot = `def _ttq_boot():
    import os, sys
    copy, orig = sys.argv[1], sys.argv[2]
    del sys.argv[:3]
    if not getattr(sys.flags, "safe_path", False):
        sys.path[0] = os.path.dirname(os.path.realpath(orig))
    g = globals()
    del g["_ttq_boot"]
    g["__file__"] = orig
    with open(copy, "rb") as f:
        return compile(f.read(), orig, "exec")
exec(_ttq_boot())
`

// Run builds the command for the script and submits it.
func (p *QueuePythonCmd) Run(a *App) error {
	base, err := p.request(a, "python3")
	if err != nil {
		return err
	}
	interp := defaultPython()
	if p.Python != nil {
		if interp = strings.TrimSpace(*p.Python); interp == "" {
			return usageErr("--python is empty: want an interpreter, such as python3 or /path/to/venv/bin/python3")
		}
	}
	if len(p.Args) > 0 && len(p.PythonArg) > 0 {
		return usageErr("the script's arguments come after it or with --python-arg, not both")
	}
	if p.OutputLimit < 0 {
		return usageErr("--output-limit %d: want 0 (all the output) or more", p.OutputLimit)
	}
	words := []string{shellQuote(interp)}
	for _, opt := range p.PythonOption {
		words = append(words, shellQuote(opt))
	}
	var stored string
	switch {
	case p.Script == "-":
		src, err := p.readStdin(a)
		if err != nil {
			return err
		}
		if stored, err = p.store(a, src); err != nil {
			return err
		}
		words = append(words, "-")
	default:
		orig, argv0, err := p.scriptPath(base.Cwd)
		if err != nil {
			return err
		}
		if !p.Snapshot {
			words = append(words, shellQuote(argv0))
			break
		}
		src, err := readLimited(orig)
		if err != nil {
			return err
		}
		if stored, err = p.store(a, src); err != nil {
			return err
		}
		words = append(words, "-c", shellQuote(snapshotBoot), shellQuote(stored), shellQuote(orig), shellQuote(argv0))
	}
	for _, arg := range append(p.Args, p.PythonArg...) {
		words = append(words, shellQuote(arg))
	}
	if p.Script == "-" {
		words = append(words, "<", shellQuote(stored))
	}
	req, err := p.request(a, strings.Join(words, " "))
	if err == nil {
		dotOnPythonPath(&req)
		var sub api.QueueResponse
		if sub, err = a.submit(req); err == nil {
			if p.Wait {
				return a.await(sub, time.Duration(p.WaitTimeout), p.OutputLimit)
			}
			if a.JSON {
				return a.printJSON(pythonQueued{sub, p.scriptFile(stored)})
			}
			return a.printQueued(sub)
		}
	}
	if stored != "" {
		os.Remove(stored)
	}
	return err
}

// pythonQueued is queue-python's --json answer: the daemon's, and the
// script that runs as the Python tt-device-queue names it.
type pythonQueued struct {
	api.QueueResponse
	// ScriptFile is the stored copy that runs (stdin, --snapshot), else
	// the script's absolute path.
	ScriptFile string `json:"script_file"`
}

// scriptFile is the script file the job runs, for pythonQueued.
func (p *QueuePythonCmd) scriptFile(stored string) string {
	if stored != "" {
		return stored
	}
	abs, err := filepath.Abs(p.Script)
	if err != nil {
		return p.Script
	}
	return abs
}

// dotOnPythonPath puts "." first on the job's PYTHONPATH unless it is on
// it already, keeping what the shell or --env gave, as the Python
// tt-device-queue does for its jobs: the modules of the directory the job
// runs in then import, wherever the script is.
func dotOnPythonPath(req *api.QueueRequest) {
	parts := []string{"."}
	for _, part := range filepath.SplitList(req.Env["PYTHONPATH"]) {
		switch part {
		case ".":
			return
		case "":
		default:
			parts = append(parts, part)
		}
	}
	if req.Env == nil {
		req.Env = map[string]string{}
	}
	req.Env["PYTHONPATH"] = strings.Join(parts, string(filepath.ListSeparator))
}

// scriptPath checks the script file and returns its absolute path and the
// sys.argv[0] it gets: the path as given when the job runs in the
// directory the path is relative to, as in the shell, else the absolute
// path.
func (p *QueuePythonCmd) scriptPath(jobCwd string) (abs, argv0 string, err error) {
	fi, err := os.Stat(p.Script)
	if err != nil {
		return "", "", usageErr("reading the script: %w", err)
	}
	if fi.IsDir() {
		return "", "", usageErr("reading the script: %s is a directory", p.Script)
	}
	if abs, err = filepath.Abs(p.Script); err != nil {
		return "", "", usageErr("reading the script %s: %w", p.Script, err)
	}
	wd, err := os.Getwd()
	if filepath.IsAbs(p.Script) || err != nil || filepath.Clean(wd) != jobCwd {
		return abs, abs, nil
	}
	return abs, p.Script, nil
}

// store copies src into the state directory's scripts/.
func (p *QueuePythonCmd) store(a *App, src []byte) (string, error) {
	if _, err := a.connect(); err != nil {
		return "", err
	}
	if a.stateDir == "" {
		return "", usageErr("%w (the script's copy is kept there)", config.ErrNoHome)
	}
	path, err := storeScript(filepath.Join(a.stateDir, ScriptsDir), src, retentionDays(), time.Now())
	if err != nil {
		return "", &Error{Code: ExitRefused, Err: err}
	}
	return path, nil
}

// readStdin returns the script from stdin.
func (p *QueuePythonCmd) readStdin(a *App) ([]byte, error) {
	return readBounded(a.In, "stdin")
}

// readLimited returns the script file's content.
func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usageErr("reading the script: %w", err)
	}
	defer f.Close()
	return readBounded(f, path)
}

// readBounded reads at most maxScriptBytes from r.
func readBounded(r io.Reader, name string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxScriptBytes+1))
	if err != nil {
		return nil, usageErr("reading the script from %s: %w", name, err)
	}
	if len(b) > maxScriptBytes {
		return nil, usageErr("the script from %s is larger than %d bytes", name, maxScriptBytes)
	}
	return b, nil
}

// storeScript writes src to a new file in dir with mode 0600 and prunes
// the files there older than keepDays.
func storeScript(dir string, src []byte, keepDays int, now time.Time) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("storing the script: %w", err)
	}
	f, err := os.CreateTemp(dir, "script-*.py")
	if err != nil {
		return "", fmt.Errorf("storing the script: %w", err)
	}
	_, werr := f.Write(src)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("storing the script in %s: %w", f.Name(), werr)
	}
	pruneScripts(dir, now.Add(-time.Duration(keepDays)*24*time.Hour))
	return f.Name(), nil
}

// pruneScripts removes stored scripts last written before cutoff. It is
// best effort: a file it cannot remove waits for the next run.
func pruneScripts(dir string, cutoff time.Time) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), "script-") {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.ModTime().Before(cutoff) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// retentionDays is how long stored scripts are kept: the daemon's
// TT_DEVICE_RETENTION_DAYS, so a script lives as long as its job's record.
func retentionDays() int {
	if n, err := strconv.Atoi(strings.TrimSpace(os.Getenv("TT_DEVICE_RETENTION_DAYS"))); err == nil && n > 0 {
		return n
	}
	return 30
}

// defaultPython is the interpreter the submitter's shell would run: the
// active virtual environment's (VIRTUAL_ENV) or conda environment's
// (CONDA_PREFIX) python3; else the ~/tenstorrent/.venv one when present
// (where tt_umd and blackhole-py live); else python3 as the job's PATH
// finds it (the submitter's PATH, sent by default).
func defaultPython() string {
	var dirs []string
	for _, env := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if v := os.Getenv(env); v != "" && filepath.IsAbs(v) {
			dirs = append(dirs, v)
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "tenstorrent", ".venv"))
	}
	for _, dir := range dirs {
		p := filepath.Join(dir, "bin", "python3")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return "python3"
}

// shellQuote quotes s for bash when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:@%+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
