package cli_test

import (
	"strings"
	"testing"
)

// TestLongOutput_KeepsItsEnd: past TT_DEVICE_MAX_LOG_BYTES the head and
// the tail are kept, so result prints the summary a test runner writes
// last, logs prints head, a marker and tail, and job says what was kept.
func TestLongOutput_KeepsItsEnd(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "TT_DEVICE_MAX_LOG_BYTES=4096")
	id := strings.TrimSpace(d.run("queue", "--", "echo 'collected 9000 items'; seq 1 20000; echo '== 9000 passed in 3.2s =='").stdout)
	r := d.runWith([]string{"TT_DEVICE_RESULT_BYTES=100"}, "", "result", id)
	r.want(t, 0, []string{"== 9000 passed in 3.2s ==\n"}, []string{"printed the end of the output", "the first 2048 and the last 2048 were kept"})
	logs := d.run("logs", id)
	logs.want(t, 0, []string{"collected 9000 items\n1\n2\n", "bytes of output cut here", "19999\n20000\n== 9000 passed in 3.2s ==\n"}, nil)
	if n := len(logs.stdout); n > 4096+200 {
		t.Fatalf("logs printed %d bytes; the limit is 4096 plus the marker", n)
	}
	d.run("job", id).want(t, 0, []string{"only the first 2048 and the last 2048 are kept"}, nil)
}
