package cli_test

import (
	"strings"
	"testing"
)

// A job started through the installed queued-exec, which queued holds
// open and passes to the helper, gets stdin, stdout and stderr and
// nothing else: not the held helper, not its request or status pipe. ls
// lists its own directory descriptor (3) besides.
func TestJob_HasOnlyItsThreeDescriptors(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for range 3 { // the first start opens the held helper; later ones reuse it
		id := strings.TrimSpace(d.run("queue", "--", "ls -l /proc/self/fd | tail -n +2 | sed 's/.* \\([0-9]*\\) -> \\(.*\\)/\\1 \\2/'").stdout)
		r := d.run("result", id)
		r.want(t, 0, nil, nil)
		var fds []string
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			fd, target, _ := strings.Cut(line, " ")
			if strings.Contains(target, "queued") || (fd != "0" && fd != "1" && fd != "2" && fd != "3") {
				t.Errorf("the job has descriptor %s -> %s", fd, target)
			}
			fds = append(fds, fd)
		}
		if strings.Join(fds, " ") != "0 1 2 3" {
			t.Errorf("the job's descriptors: %q", r.stdout)
		}
	}
}
