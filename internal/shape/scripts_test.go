package shape

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// earlyExit is a pipe into a command that may stop reading before the
// writer is done: grep -q (or -m, -l) at its first match, head. Under
// set -o pipefail the writer's SIGPIPE then fails the whole pipeline
// even though the match was found.
var earlyExit = regexp.MustCompile(`\|\s*(grep\s+(-[a-zA-Z]*[qlm]|--quiet|--max-count)|head)\b`)

// TestShape_NoPipefailEarlyExit: in the shell scripts that set pipefail
// (scripts/*.sh, .ci/run), no pipeline feeds a command that may exit
// before its writer is done, outside an `sh -c` (which has no pipefail).
// The demo's page check, `http_get ... | grep -q`, failed 32 times in 200
// that way on a busy machine, as "queued does not serve the page".
func TestShape_NoPipefailEarlyExit(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	files, _ := filepath.Glob(filepath.Join(root, "scripts", "*.sh"))
	files = append(files, filepath.Join(root, ".ci", "run"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "pipefail") {
			continue
		}
		for i, line := range strings.Split(string(b), "\n") {
			code := strings.TrimSpace(line)
			if strings.HasPrefix(code, "#") || strings.Contains(code, `sh -c "`) || strings.Contains(code, `sh -c '`) {
				continue
			}
			if earlyExit.MatchString(code) {
				t.Errorf("%s:%d pipes into a command that may exit early, under pipefail: %s", strings.TrimPrefix(f, root+"/"), i+1, code)
			}
		}
	}
}
