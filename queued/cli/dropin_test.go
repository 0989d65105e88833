package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The Python tt-device-queue's command lines and --json answers, run
// through the real CLI against a real daemon: switching tools breaks no
// script (docs/switching.md lists what still differs).

// object parses the one JSON object --json printed.
func object(t *testing.T, r result) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%v", err, r)
	}
	return m
}

// keys fails the test unless m has every key.
func keys(t *testing.T, what string, m map[string]any, want ...string) {
	t.Helper()
	for _, k := range want {
		if _, ok := m[k]; !ok {
			t.Errorf("%s lacks %q: %v", what, k, m)
		}
	}
}

// A program given as several words is a command: each word stays one
// argument, quoted for the shell as the Python tool's shlex.join does; one
// word stays a shell program.
func TestRun_SeveralWordsAreOneCommand(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	py := realPython(t)
	r := d.run("run", "--", py, "-c", "import sys; print(sys.argv[1:])", "a b", "it's", "$HOME")
	r.want(t, 0, []string{`['a b', "it's", '$HOME']`}, nil)
	// Without --, as the Python tool takes it too.
	d.run("run", "printf", "%s|", "x y", "z").want(t, 0, []string{"x y|z|"}, nil)
	r = d.run("queue", "--device", "1", "--", "printf", "%s|", "a b")
	r.want(t, 0, nil, nil)
	if j := d.job(strings.TrimSpace(r.stdout)); j.Cmd != `printf '%s|' 'a b'` {
		t.Errorf("queue of three words recorded %q", j.Cmd)
	}
	// One word: a shell program, with its pipes and &&.
	d.run("run", "--", "echo one && echo two | tr o 0").want(t, 0, []string{"one\ntw0\n"}, nil)
}

// queue-python's --python-arg is an argument of the script, as in the
// Python tool (python3 s.py x1); interpreter options are --python-option.
func TestQueuePython_PythonArgIsTheScripts(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	py := realPython(t)
	dir := t.TempDir()
	src := "import sys\nprint(sys.argv[1:], sys.flags.dont_write_bytecode)\n"
	if err := os.WriteFile(filepath.Join(dir, "s.py"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	d.runIn(dir, nil, "", "queue-python", "--python", py, "--wait", "s.py", "--python-arg", "x1", "--python-arg=--flag").
		want(t, 0, []string{"['x1', '--flag'] 0\n"}, nil)
	d.runIn(dir, nil, "", "queue-python", "--python", py, "--wait", "--python-option=-B", "s.py", "--python-arg", "x1").
		want(t, 0, []string{"['x1'] 1\n"}, nil)
	d.runIn(dir, nil, "", "queue-python", "--python", py, "--wait", "s.py", "a", "b").
		want(t, 0, []string{"['a', 'b'] 0\n"}, nil)
	d.runIn(dir, nil, "", "queue-python", "s.py", "a", "--python-arg", "b").
		want(t, 2, nil, []string{"--python-arg", "not both"})
}

// queue-python keeps the submitting directory importable, as the Python
// tool does by putting "." on the job's PYTHONPATH: a script in a
// subdirectory imports a module of the directory it was submitted from.
func TestQueuePython_SubmittingDirectoryIsImportable(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	py := realPython(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{
		"mylib.py":         "NAME = 'mylib of the submitting directory'\n",
		"scripts/train.py": "import mylib, os\nprint(mylib.NAME)\nprint(os.environ['PYTHONPATH'])\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d.runIn(dir, nil, "", "queue-python", "--python", py, "--wait", "scripts/train.py").
		want(t, 0, []string{"mylib of the submitting directory\n.\n"}, nil)
	// The shell's PYTHONPATH is kept, after it.
	d.runIn(dir, []string{"PYTHONPATH=/opt/lib"}, "", "queue-python", "--python", py, "--wait", "scripts/train.py").
		want(t, 0, []string{"mylib of the submitting directory\n.:/opt/lib\n"}, nil)
}

// kill without an id stops the caller's running job, not every job of a
// card; it is refused, naming what runs, when there is not exactly one.
func TestKill_WithoutIDStopsYourRunningJob(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.run("kill").want(t, 1, nil, []string{"no running job", "list"})
	// kill "$ID" with an unset ID is a mistake, not "your running job".
	d.run("kill", "").want(t, 2, nil, []string{"empty job id"})

	g := newGate(t)
	running := strings.TrimSpace(d.run("queue", "--device", "0", "--", g.wait()).stdout)
	d.waitState(running, "running")
	other := strings.TrimSpace(d.run("--client-id", "another-client", "queue", "--device", "0", "--", "echo still queued").stdout)
	// kill --device 0 was suggested for this and cancelled every queued
	// job of the card, other clients' included. Now it stops the running
	// one only.
	r := d.run("kill", "--device", "0")
	r.want(t, 0, []string{"stopping job " + running}, nil)
	d.run("result", running).want(t, 130, nil, []string{"was killed"})
	d.run("result", other).want(t, 0, []string{"still queued"}, nil)
	d.run("kill", "--device", "1").want(t, 1, nil, []string{"no running job", "card 1"})

	// Two running jobs: which is ambiguous, unless the client id says.
	g0, g1 := newGate(t), newGate(t)
	defer g0.open(t)
	defer g1.open(t)
	j0 := strings.TrimSpace(d.run("queue", "--device", "0", "--", g0.wait()).stdout)
	j1 := strings.TrimSpace(d.run("queue", "--device", "1", "--", g1.wait()).stdout)
	d.waitState(j0, "running")
	d.waitState(j1, "running")
	d.run("kill").want(t, 1, nil, []string{j0, j1, "name one"})
	m := object(t, d.run("--json", "kill", "--device", "1"))
	keys(t, "kill --json", m, "killed", "job_id", "status")
	if k, _ := m["killed"].(map[string]any); k["id"] != j1 || k["signal"] != "SIGINT" {
		t.Errorf("kill --json --device 1 = %v", m)
	}
	d.run("result", j1).want(t, 130, nil, nil)
	j1b := strings.TrimSpace(d.run("--client-id", "ci", "queue", "--device", "1", "--", g1.wait()).stdout)
	d.waitState(j1b, "running")
	d.run("--client-id", "ci", "kill").want(t, 0, []string{"stopping job " + j1b}, nil)

	// --all is the old kill --device: every job of the card, queued ones
	// included.
	q := strings.TrimSpace(d.run("queue", "--device", "0", "--", "true").stdout)
	d.run("kill", "--device", "0", "--all").want(t, 0, []string{"stopping job " + j0, q}, nil)
	if r := d.run("result", q); !strings.Contains(r.stderr, "was killed") {
		t.Errorf("the queued job after kill --all: %v", r)
	}
}

// --json answers of queue, queue-python, job, kill, reset and result carry
// the Python tool's keys.
func TestJSON_PythonKeys(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	m := object(t, d.run("--json", "queue", "--repeat", "2", "--", "echo hi"))
	keys(t, "queue --json", m, "job_id", "position", "estimated_wait_sec", "estimated_run_sec", "output_file", "repeat", "timeout", "mode")
	id, _ := m["job_id"].(string)

	r := d.run("--json", "result", id)
	m = object(t, r)
	keys(t, "result --json", m, "status", "exit_code", "output_file", "elapsed", "mode", "repeat", "repeat_completed", "started_at",
		"finished_at", "timed_out", "log_size", "log_truncated", "dropped_log_bytes", "error", "output", "output_truncated", "job")
	if m["status"] != "done" || m["exit_code"] != 0.0 || m["output"] != "\n[tt-device-queue] Repeat 1/2\nhi\n\n[tt-device-queue] Repeat 2/2\nhi\n" || m["output_truncated"] != false || m["repeat_completed"] != 2.0 {
		t.Errorf("result --json = %v", m)
	}
	// The Python tool's name of result's limit.
	d.run("result", "--output-limit", "3", id).want(t, 0, []string{"hi\n"}, []string{"output cut"})
	m = object(t, d.run("--json", "job", id))
	keys(t, "job --json", m, "job_id", "status", "exit_code", "output_file", "elapsed", "timed_out", "cmd", "cwd", "client_id")

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "s.py"), []byte("print(1)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m = object(t, d.runIn(dir, nil, "", "--json", "queue-python", "s.py"))
	keys(t, "queue-python --json", m, "job_id", "script_file", "output_file", "position")
	if m["script_file"] != filepath.Join(dir, "s.py") {
		t.Errorf("queue-python --json script_file = %v", m["script_file"])
	}

	m = object(t, d.run("--json", "reset", "--device", "1"))
	keys(t, "reset --json", m, "action", "device_state", "reset_epoch", "hint", "resets")
	if m["action"] != "scheduled" {
		t.Errorf("reset --json = %v", m)
	}
}

// run and queue-python take the Python tool's --output-limit: they print
// the first that many bytes of the output, as the tool did, say on stderr
// that the rest was left out and where to read it, and still exit with
// the job's status. Without it the whole output is printed; a negative
// limit is a usage error naming the value.
func TestRun_OutputLimitPrintsTheFirstBytes(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	r := d.run("run", "--output-limit", "5", "--", "echo 0123456789; echo more; exit 3")
	r.want(t, 3, nil, []string{"output cut: printed the first 5 bytes (--output-limit)", "logs"})
	if r.stdout != "01234" {
		t.Errorf("stdout %q, want the first 5 bytes", r.stdout)
	}
	d.run("run", "--output-limit", "100", "--", "echo whole").want(t, 0, []string{"whole\n"}, nil)
	if r := d.run("run", "--output-limit", "100", "--", "echo whole"); strings.Contains(r.stderr, "output cut") {
		t.Errorf("output within the limit said cut: %q", r.stderr)
	}
	d.run("run", "--output-limit=-1", "--", "true").want(t, 2, nil, []string{"--output-limit -1"})

	py := realPython(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "s.py"), []byte("print('abcdefgh')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = d.runIn(dir, nil, "", "queue-python", "--python", py, "--wait", "--output-limit", "3", "s.py")
	r.want(t, 0, nil, []string{"printed the first 3 bytes"})
	if r.stdout != "abc" {
		t.Errorf("queue-python stdout %q, want the first 3 bytes", r.stdout)
	}
}
