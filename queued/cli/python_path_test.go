package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// realPython is the python3 interpreter itself (not a wrapper such as a
// pyenv shim, which needs the tester's HOME), found on the test's PATH.
func realPython(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed to test queue-python: %v", err)
	}
	out, err := exec.Command(p, "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Fatalf("asking %s for its executable: %v", p, err)
	}
	return strings.TrimSpace(string(out))
}

// runIn runs the CLI with its working directory in dir.
func (d *daemon) runIn(dir string, env []string, stdin string, args ...string) result {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := d.command(ctx, env, args...)
	cmd.Dir, cmd.Stdin = dir, strings.NewReader(stdin)
	return runCmd(d.t, cmd)
}

// probeScript imports a sibling module and prints, as one JSON line, what
// a script sees of where it runs.
const probeScript = `import json, os, sys
import helper
print(json.dumps({"path0": sys.path[0], "file": globals().get("__file__"), "argv": sys.argv,
    "helper": helper.VALUE, "cwd": os.getcwd(), "optimize": sys.flags.optimize}))
`

// probe is probeScript's report.
type probe struct {
	Path0    string   `json:"path0"`
	File     string   `json:"file"`
	Argv     []string `json:"argv"`
	Helper   string   `json:"helper"`
	Cwd      string   `json:"cwd"`
	Optimize int      `json:"optimize"`
}

// repo is a checkout with a script and the module it imports.
func repo(t *testing.T) (dir string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "checkout")
	if err := os.MkdirAll(filepath.Join(dir, "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{
		"tools/probe.py":  probeScript,
		"tools/helper.py": "VALUE = 'sibling'\n",
		"helper.py":       "VALUE = 'working directory'\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// parseProbe reads the probe's JSON line from a waited-for run.
func parseProbe(t *testing.T, r result) probe {
	t.Helper()
	var p probe
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &p); err != nil {
		t.Fatalf("the script did not print its probe: %v\n%v", err, r)
	}
	return p
}

// TestQueuePython_RunsTheFileFromItsOwnPath runs a real python3 script that
// imports a module beside it, as `python3 tools/probe.py` run in the
// checkout would: sys.path[0] is the script's directory, __file__ its
// absolute path, sys.argv[0] the path as given.
func TestQueuePython_RunsTheFileFromItsOwnPath(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	py := realPython(t)
	dir := repo(t)
	tools := filepath.Join(dir, "tools")

	want := func(t *testing.T, p probe, argv0 string) {
		t.Helper()
		if p.Helper != "sibling" || p.Path0 != tools || p.File != filepath.Join(tools, "probe.py") ||
			len(p.Argv) != 3 || p.Argv[0] != argv0 || p.Argv[1] != "a b" || p.Argv[2] != "c" {
			t.Fatalf("the script ran as %+v; want it run from %s with argv[0] %q", p, tools, argv0)
		}
	}
	t.Run("relative path from the checkout", func(t *testing.T) {
		r := d.runIn(dir, nil, "", "queue-python", "--python", py, "--wait", "tools/probe.py", "a b", "c")
		r.want(t, 0, nil, nil)
		p := parseProbe(t, r)
		want(t, p, "tools/probe.py")
		if p.Cwd != dir {
			t.Fatalf("the job ran in %s, want %s", p.Cwd, dir)
		}
	})
	t.Run("elsewhere with --cwd", func(t *testing.T) {
		other := t.TempDir()
		r := d.runIn(dir, nil, "", "queue-python", "--python", py, "--cwd", other, "--wait", "tools/probe.py", "a b", "c")
		r.want(t, 0, nil, nil)
		p := parseProbe(t, r)
		want(t, p, filepath.Join(tools, "probe.py"))
		if p.Cwd != other {
			t.Fatalf("the job ran in %s, want %s", p.Cwd, other)
		}
	})
	t.Run("edits before the job starts are seen without --snapshot", func(t *testing.T) {
		g := newGate(t)
		d.run("queue", "--", g.wait()).want(t, 0, nil, nil)
		script := filepath.Join(t.TempDir(), "edit.py")
		if err := os.WriteFile(script, []byte("print('before')\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := d.runIn(dir, nil, "", "queue-python", "--python", py, script)
		r.want(t, 0, nil, nil)
		id := strings.TrimSpace(r.stdout)
		if err := os.WriteFile(script, []byte("print('after')\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		g.open(t)
		d.run("result", id).want(t, 0, []string{"after"}, nil)
	})
}

// TestQueuePython_StdinRunsInTheWorkingDirectory: `-` puts the job's
// working directory on sys.path as `python3 -` does, so the checkout's
// modules import.
func TestQueuePython_StdinRunsInTheWorkingDirectory(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	py := realPython(t)
	dir := repo(t)
	r := d.runIn(dir, nil, probeScript, "queue-python", "--python", py, "--wait", "-", "x")
	r.want(t, 0, nil, nil)
	p := parseProbe(t, r)
	if p.Helper != "working directory" || p.Path0 != "" || p.Cwd != dir || len(p.Argv) != 2 || p.Argv[0] != "-" || p.Argv[1] != "x" || p.File != "<stdin>" {
		t.Fatalf("stdin script ran as %+v; want python3 - semantics in %s", p, dir)
	}
}

// TestQueuePython_SnapshotKeepsImports: with --snapshot the job runs the
// script as it was at submission, and still imports its siblings and sees
// its own path.
func TestQueuePython_SnapshotKeepsImports(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	py := realPython(t)
	dir := repo(t)
	tools := filepath.Join(dir, "tools")
	g := newGate(t)
	d.run("queue", "--", g.wait()).want(t, 0, nil, nil)
	r := d.runIn(dir, nil, "", "queue-python", "--python", py, "--snapshot", "tools/probe.py", "a b")
	r.want(t, 0, nil, nil)
	id := strings.TrimSpace(r.stdout)
	if err := os.WriteFile(filepath.Join(tools, "probe.py"), []byte("raise SystemExit('edited after submission')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g.open(t)
	res := d.run("result", id)
	res.want(t, 0, nil, nil)
	p := parseProbe(t, res)
	if p.Helper != "sibling" || p.Path0 != tools || p.File != filepath.Join(tools, "probe.py") ||
		len(p.Argv) != 2 || p.Argv[0] != "tools/probe.py" || p.Argv[1] != "a b" {
		t.Fatalf("snapshot ran as %+v; want the submitted script run as from %s", p, tools)
	}
}

// TestQueuePython_InterpreterAndItsArguments: --python picks the
// interpreter and each --python-option goes before the script.
func TestQueuePython_InterpreterAndItsArguments(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	py := realPython(t)
	dir := repo(t)
	r := d.runIn(dir, nil, "", "queue-python", "--python", py, "--python-option=-O", "--python-option=-O", "--wait", "tools/probe.py", "a b", "c")
	r.want(t, 0, nil, nil)
	if p := parseProbe(t, r); p.Optimize != 2 || p.Helper != "sibling" {
		t.Fatalf("--python-option -O twice gave %+v, want optimize 2", p)
	}
	d.runIn(dir, nil, "", "queue-python", "--python", filepath.Join(dir, "no-such-python"), "--wait", "tools/probe.py").
		want(t, 127, nil, []string{"exit code 127"})
	d.runIn(dir, nil, "", "queue-python", "--python", "", "tools/probe.py").
		want(t, 2, nil, []string{"--python"})
}
