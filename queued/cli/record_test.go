package cli_test

import (
	"strings"
	"testing"
)

// TestQueue_RecordBudgetCheckedBeforeSending: a job whose command and
// environment together pass the record budget (256 KiB) is refused by
// the CLI itself, with both sizes and the limit named, and nothing
// reaches the daemon.
func TestQueue_RecordBudgetCheckedBeforeSending(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	cmd := "echo " + strings.Repeat("c", 100<<10)
	r := d.run("queue", "--no-inherit-env", "-e", "A="+strings.Repeat("a", 100<<10), "-e", "B="+strings.Repeat("b", 100<<10), "--", cmd)
	r.want(t, 2, nil, []string{"102405 bytes", "204806 bytes", "307211 bytes", "262144"})
	d.run("status").want(t, 0, []string{"0 of at most"}, nil)
}
