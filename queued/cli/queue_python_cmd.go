package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// QueuePythonCmd submits a Python script. The script is copied into the
// state directory (scripts/, mode 0600), so the daemon can read it and
// later edits to the original do not change the queued job; the copy is
// removed if the submission fails, and copies older than
// TT_DEVICE_RETENTION_DAYS are pruned whenever a new one is written.
type QueuePythonCmd struct {
	Submission
	Wait        bool     `help:"Wait like run: show the position, stream the output and exit with the script's status."`
	WaitTimeout Duration `placeholder:"DURATION" help:"With --wait, stop waiting after this long (seconds, or such as 10m) and exit 124; the job goes on. 0 (the default) waits without limit."`
	Script      string   `arg:"" placeholder:"SCRIPT" help:"The script file, or - to read it from stdin."`
	Args        []string `arg:"" optional:"" placeholder:"ARG" help:"Arguments for the script."`
}

// ScriptsDir is where queue-python keeps scripts, inside the state
// directory.
const ScriptsDir = "scripts"

// maxScriptBytes bounds a script read from a file or stdin.
const maxScriptBytes = 16 << 20

// Run stores the script and submits it.
func (p *QueuePythonCmd) Run(a *App) error {
	if _, err := p.request(a, "python3"); err != nil {
		return err
	}
	src, err := p.read(a)
	if err != nil {
		return err
	}
	if _, err := a.connect(); err != nil {
		return err
	}
	path, err := storeScript(filepath.Join(a.stateDir, ScriptsDir), src, retentionDays(), time.Now())
	if err != nil {
		return &Error{Code: ExitRefused, Err: err}
	}
	words := []string{shellQuote(python()), shellQuote(path)}
	for _, arg := range p.Args {
		words = append(words, shellQuote(arg))
	}
	req, err := p.request(a, strings.Join(words, " "))
	if err != nil {
		os.Remove(path)
		return err
	}
	sub, err := a.submit(req)
	if err != nil {
		os.Remove(path)
		return err
	}
	if !p.Wait {
		return a.printQueued(sub)
	}
	return a.await(sub, time.Duration(p.WaitTimeout))
}

// read returns the script from its file or stdin.
func (p *QueuePythonCmd) read(a *App) ([]byte, error) {
	var r io.Reader
	name := p.Script
	if p.Script == "-" {
		r, name = a.In, "stdin"
	} else {
		f, err := os.Open(p.Script)
		if err != nil {
			return nil, usageErr("reading the script: %w", err)
		}
		defer f.Close()
		r = f
	}
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

// python is the interpreter: the ~/tenstorrent/.venv one when present
// (where tt_umd and blackhole-py live), else python3 from the daemon's
// PATH.
func python() string {
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, "tenstorrent", ".venv", "bin", "python3")
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
