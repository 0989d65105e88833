package ttprocessreceiver

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The default redaction, with no command_line_redact configured: values of
// secret-named options, whole even when they held spaces (the kernel keeps
// no quotes, so "correct horse" arrives as two words), and URL userinfo. A
// redacted value is never the friendly name when the line has a better one.
func TestScrape_DefaultRedaction(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for pid, argv := range map[int][]string{
		4242: {"python3", "train.py", "--password", "correct horse", "--epochs", "3"},
		4243: {"python3", "sync.py", "--db", "https://user:secret@db.example/x"},
		4244: {"python3", "--token", "hunter2", "serve.py"},
		4245: {"tool", "--api-key=abc def", "--db-password=pw"},
		4246: {"pytest", "--auth-token", "s3cr3t"},
		4247: {"psql", "postgres://bob:pw@db/x"},
	} {
		b.host.process(pid, uint64(pid), argv[0], argv...)
	}
	b.host.pids(0, 4242, 4243, 4244, 4245, 4246, 4247)
	b.start(t)
	got := processPoints(t, b.scrape(t))
	for pid, want := range map[string][2]string{
		"4242": {"train.py", "python3 train.py --password *** --epochs 3"},
		"4243": {"sync.py", "python3 sync.py --db https://***@db.example/x"},
		"4244": {"serve.py", "python3 --token *** serve.py"},
		"4245": {"tool", "tool --api-key=*** --db-password=***"},
		"4246": {"pytest", "pytest --auth-token ***"},
		"4247": {"psql", "psql postgres://***@db/x"},
	} {
		assert.Equal(t, want[1], attr(got[pid], "command_line"), "pid %s", pid)
		assert.Equal(t, want[0], attr(got[pid], "friendly_name"), "pid %s", pid)
	}
}

// command_line_redact: [] turns redaction off.
func TestScrape_RedactionOff(t *testing.T) {
	t.Parallel()
	b := setup(t, func(cfg *Config) { cfg.CommandLineRedact = []string{} })
	b.host.process(4242, 9001, "python3", "python3", "serve.py", "--token", "hunter2")
	b.host.pids(0, 4242)
	b.start(t)
	assert.Equal(t, "python3 serve.py --token hunter2", attr(processPoints(t, b.scrape(t))["4242"], "command_line"))
}
