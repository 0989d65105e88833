package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var commands = []string{"run", "queue", "job", "result", "logs", "queue-python", "status", "kill", "reset", "completion", "import"}

func TestCompletion(t *testing.T) {
	t.Parallel()
	d := &daemon{t: t, home: t.TempDir()}
	for _, shell := range []string{"bash", "zsh"} {
		r := d.run("completion", shell)
		r.want(t, 0, append(append([]string{}, commands...), "--wait-timeout", "--json", "--follow", "--no-wait", "--device"), nil)
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
		if got := complete("tt-device-queue", "import", "../legacyimport/testdata/make_d"); got != "../legacyimport/testdata/make_db.py" {
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
