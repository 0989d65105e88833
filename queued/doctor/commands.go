package doctor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// words splits a shell command into words the way bash would for the
// simple commands queued's defaults are: blanks separate words, and single
// or double quotes group them. It is enough to find the program and its
// first argument; anything fancier is the user's own command.
func words(cmd string) []string {
	var out []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for _, r := range cmd {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// program finds the program a shell command runs: its first word with a
// leading ~/ expanded, looked up in PATH when it has no slash.
func (h Host) program(word string) (string, error) {
	if strings.HasPrefix(word, "~/") && h.Home != "" {
		word = filepath.Join(h.Home, word[2:])
	}
	if !strings.Contains(word, "/") {
		return exec.LookPath(word)
	}
	fi, err := os.Stat(word)
	if err != nil {
		return word, err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return word, fmt.Errorf("%s is not an executable file", word)
	}
	return word, nil
}

// run runs argv within the command timeout and returns its combined output,
// trimmed to its last line of interest.
func (h Host) run(ctx context.Context, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, h.CommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("no answer in %s: %w", h.CommandTimeout, ctx.Err())
	}
	return lastLine(out.String()), err
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	if len(l) > 200 {
		l = l[:200] + "..."
	}
	return l
}

func checkReset(ctx context.Context, h Host) Check {
	c := Check{Name: "reset-command"}
	w := words(h.ResetCmd)
	if len(w) == 0 {
		c.Status, c.Detail, c.Fix = Fail, "TT_DEVICE_RESET_CMD is empty", "unset TT_DEVICE_RESET_CMD to use tt-smi, or set it to a command that resets card {device}"
		return c
	}
	prog, err := h.program(w[0])
	if err != nil {
		c.Status, c.Detail, c.Fix = Fail, fmt.Sprintf("the reset command's program %s: %v", w[0], unwrapPath(err)),
			"install tt-smi into ~/tenstorrent/.venv (python3 -m venv ~/tenstorrent/.venv && ~/tenstorrent/.venv/bin/pip install tt-smi), or set TT_DEVICE_RESET_CMD"
		return c
	}
	if filepath.Base(prog) != "tt-smi" {
		c.Status, c.Detail = OK, fmt.Sprintf("custom reset program %s is executable (not run: only tt-smi is known to take --version)", prog)
		return c
	}
	out, err := h.run(ctx, prog, "--version")
	if err != nil {
		c.Status, c.Detail, c.Fix = Fail, fmt.Sprintf("%s --version failed: %v: %s", prog, err, out), "reinstall tt-smi: ~/tenstorrent/.venv/bin/pip install --force-reinstall tt-smi"
		return c
	}
	c.Status, c.Detail = OK, fmt.Sprintf("%s --version: %s", prog, out)
	return c
}

func checkHealth(ctx context.Context, h Host) Check {
	c := Check{Name: "health-check"}
	w := words(h.HealthCheckCmd)
	if len(w) == 0 {
		c.Status, c.Detail = Skip, "no health check command"
		return c
	}
	if !strings.HasPrefix(filepath.Base(w[0]), "python") {
		c.Status, c.Detail = Skip, fmt.Sprintf("custom health check %s is not a Python interpreter; cannot check for tt_umd", w[0])
		return c
	}
	py, err := h.program(w[0])
	if err != nil {
		c.Status, c.Detail, c.Fix = Fail, fmt.Sprintf("the health check's interpreter %s: %v", w[0], unwrapPath(err)),
			"create it with tt_umd installed (python3 -m venv ~/tenstorrent/.venv && ~/tenstorrent/.venv/bin/pip install tt-umd), or set TT_DEVICE_HEALTH_CHECK_CMD"
		return c
	}
	if len(w) > 1 && strings.HasSuffix(w[1], ".py") {
		if _, err := os.Stat(w[1]); err != nil {
			c.Status, c.Detail, c.Fix = Fail, fmt.Sprintf("the health check script: %v", unwrapPath(err)), "reinstall queued (make install puts health_check.py in ~/.local/share/tt-device-queue)"
			return c
		}
	}
	out, err := h.run(ctx, py, "-c", "import tt_umd")
	if err != nil {
		c.Status, c.Detail, c.Fix = Fail, fmt.Sprintf("%s cannot import tt_umd: %s", py, out), py+" -m pip install tt-umd"
		return c
	}
	c.Status, c.Detail = OK, py+" imports tt_umd"
	return c
}

// unwrapPath drops the operation and path an *os.PathError repeats, since
// the detail already names the path.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
