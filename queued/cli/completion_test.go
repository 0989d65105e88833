package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var commands = []string{"run", "queue", "job", "result", "logs", "queue-python", "status", "list", "wait", "kill", "resubmit", "reset", "completion", "import"}

func TestCompletion(t *testing.T) {
	t.Parallel()
	d := &daemon{t: t, home: t.TempDir()}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		r := d.run("completion", shell)
		flags := []string{"--wait-timeout", "--json", "--follow", "--no-wait", "--device"}
		if shell == "fish" {
			flags = []string{"-l wait-timeout", "-l json", "-l follow", "-l no-wait", "-l device -s d"}
		}
		r.want(t, 0, append(append([]string{}, commands...), flags...), nil)
		path := filepath.Join(t.TempDir(), "completion."+shell)
		if err := os.WriteFile(path, []byte(r.stdout), 0o600); err != nil {
			t.Fatal(err)
		}
		sh, err := exec.LookPath(shell)
		if err != nil {
			t.Logf("no %s here to check the syntax of its script", shell)
			continue
		}
		if out, err := exec.Command(sh, "-n", path).CombinedOutput(); err != nil {
			t.Fatalf("%s -n rejects the script: %v\n%s", shell, err, out)
		}
		if shell != "bash" {
			continue
		}
		// Drive the bash function as bash's completion would.
		complete := func(words ...string) string {
			script := "source " + path + "\nCOMP_WORDS=(" + quoteWords(words) + ")\nCOMP_CWORD=" +
				itoa(len(words)-1) + "\n_tt_device_queue\necho \"${COMPREPLY[*]}\"\n"
			out, err := exec.Command(sh, "-c", script).CombinedOutput()
			if err != nil {
				t.Fatalf("completing %q: %v\n%s", words, err, out)
			}
			return strings.TrimSpace(string(out))
		}
		if got := complete("tt-device-queue", "--json", "qu"); got != "queue queue-python" {
			t.Fatalf("completing qu = %q", got)
		}
		if got := complete("tt-device-queue", "--host", "x", "run", "--wa"); got != "--wait-timeout" {
			t.Fatalf("completing run --wa = %q", got)
		}
		if got := complete("tt-device-queue", "completion", ""); got != "-h --help bash zsh" && !strings.Contains(got, "bash zsh") {
			t.Fatalf("completing completion = %q", got)
		}
		if got := complete("tt-device-queue", "logs", "--f"); got != "--follow" {
			t.Fatalf("completing logs --f = %q", got)
		}
		if got := complete("tt-device-queue", "import", "../../testdata/python-tool/make_d"); got != "../../testdata/python-tool/make_db.py" {
			t.Fatalf("completing import's path = %q, want the file", got)
		}
	}
}

func quoteWords(words []string) string {
	var q []string
	for _, w := range words {
		q = append(q, "'"+w+"'")
	}
	return strings.Join(q, " ")
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestCompletion_JobIDsAndCards: the scripts complete job ids and card
// numbers from the running queued (bash driven for real; zsh and fish
// scripts ask the same hidden command).
func TestCompletion_JobIDsAndCards(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := strings.TrimSpace(d.run("queue", "--device", "1", "--", "true").stdout)
	d.run("result", id).want(t, 0, nil, nil)
	d.run("__complete", "cards").want(t, 0, []string{"0\n1\n"}, nil)
	d.run("__complete", "jobs").want(t, 0, []string{id}, nil)
	for _, shell := range []string{"zsh", "fish"} {
		d.run("completion", shell).want(t, 0, []string{"__complete jobs", "__complete cards"}, nil)
	}
	path := filepath.Join(t.TempDir(), "completion.bash")
	if err := os.WriteFile(path, []byte(d.run("completion", "bash").stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) string {
		script := "source " + path + "\nCOMP_WORDS=(" + quoteWords(words) + ")\nCOMP_CWORD=" +
			itoa(len(words)-1) + "\n_tt_device_queue\necho \"${COMPREPLY[*]}\"\n"
		cmd := exec.Command("bash", "-c", script)
		cmd.Env = append(append([]string(nil), d.env...), "PATH="+bin+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("completing %q: %v\n%s", words, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := complete("tt-device-queue", "kill", id[:4]); got != id {
		t.Fatalf("completing kill %s = %q", id[:4], got)
	}
	if got := complete("tt-device-queue", "list", "--device", ""); got != "0 1" {
		t.Fatalf("completing list --device = %q", got)
	}
	if got := complete("tt-device-queue", "run", "-d", ""); got != "0 1" {
		t.Fatalf("completing run -d = %q", got)
	}
}
