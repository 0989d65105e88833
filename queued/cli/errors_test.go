package cli_test

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ttkit/ttkit/queued/api"
)

func TestExitCodes_RefusalUsageAndConnection(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)

	t.Run("refused: the daemon's message, exit 1", func(t *testing.T) {
		d.run("run", "--device", "7", "--", "true").want(t, 1, nil, []string{"queued refused the request: device_id: no card 7; the cards are 0, 1"})
		d.run("job", "ffffffff").want(t, 1, nil, []string{"queued refused the request"})
		d.run("job", "fff").want(t, 1, nil, []string{"at least 6 characters"})
		d.run("queue", "--timeout", "999999", "--", "true").want(t, 1, nil, []string{"timeout", "TT_DEVICE_MAX_TIMEOUT"})
	})
	t.Run("usage: exit 2", func(t *testing.T) {
		d.run("frobnicate").want(t, 2, nil, []string{"unexpected argument frobnicate"})
		d.run("run").want(t, 2, nil, []string{`expected "<program> ..."`})
		d.run("run", "-e", "1A=x", "--", "true").want(t, 2, nil, []string{`"1A" is not a variable name`})
		d.run("run", "-e", "NOEQUALS", "--", "true").want(t, 2, nil, []string{"want NAME=VALUE"})
		d.run("run", "-e", "TT_QUEUE_JOB_ID=1", "--", "true").want(t, 2, nil, []string{"queued sets TT_QUEUE_JOB_ID itself"})
		d.run("run", "-e", "A=1", "-e", "A=2", "--", "true").want(t, 2, nil, []string{"A is given twice"})
		d.run("run", "--device=-1", "--", "true").want(t, 2, nil, []string{"want a card number"})
		d.run("run", "--wait-timeout", "soon", "--", "true").want(t, 2, nil, []string{"want seconds"})
		d.run("run", "--", "  ").want(t, 2, nil, []string{"the program is empty"})
		d.run("completion", "tcsh").want(t, 2, nil, []string{"bash", "zsh", "fish"})
		d.runWith([]string{"TT_DEVICE_RESULT_BYTES=0"}, "", "result", "abcdef").want(t, 2, nil, []string{"TT_DEVICE_RESULT_BYTES"})
		if r := d.run("--json", "run"); r.stdout != "" {
			t.Fatalf("usage went to stdout under --json: %v", r)
		}
	})
	t.Run("help: exit 0", func(t *testing.T) {
		d.run("--help").want(t, 0, []string{"run", "queue-python", "completion", "TT_DEVICE_URL"}, nil)
		d.run("reset", "--help").want(t, 0, []string{"--device", "<job-id>"}, nil)
	})
}

func TestExitCodes_DaemonNotRunning(t *testing.T) {
	t.Parallel()
	d := &daemon{t: t, state: t.TempDir(), home: t.TempDir()}
	d.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + d.home, "TT_DEVICE_LOG_DIR=" + d.state}
	hint := "systemctl --user start queued"

	sock := "unix://" + filepath.Join(d.state, api.SocketFile)
	// Unreachable is exit 1, as the Python tt-device-queue exits when its
	// server cannot be reached; scripts test for it.
	d.run("status").want(t, 1, nil, []string{"cannot reach queued at " + sock, "no such file", hint})
	d.run("--port", "5741", "status").want(t, 1, nil, []string{"no token in " + d.state, hint})

	if _, err := api.EnsureToken(d.state); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	url := "http://127.0.0.1:" + strconv.Itoa(port)

	d.run("--port", strconv.Itoa(port), "status").want(t, 1, nil, []string{"cannot reach queued at " + url, "connection refused", hint, "or run `queued`"})
	d.runWith([]string{"TT_DEVICE_URL=" + url}, "", "run", "--", "true").want(t, 1, nil, []string{"cannot reach queued at " + url})
	d.runWith([]string{"TT_DEVICE_PORT=" + strconv.Itoa(port)}, "", "job", "abcdef").want(t, 1, nil, []string{"cannot reach queued at " + url})
	d.runWith([]string{"TT_DEVICE_PORT=" + strconv.Itoa(port)}, "", "--json", "queue", "--", "true").want(t, 1, nil, []string{"cannot reach queued at " + url})
	// A stale address file from a daemon that died is not followed; a
	// stale socket it left refuses the connection.
	if err := api.WriteAddress(d.state, url); err != nil {
		t.Fatal(err)
	}
	stale, err := net.Listen("unix", filepath.Join(d.state, api.SocketFile))
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	d.run("kill", "abcdef").want(t, 1, nil, []string{"cannot reach queued at " + sock, "connection refused", hint})
	d.run("--host", "ftp://x", "status").want(t, 2, nil, []string{"want a host name or a URL"})
	// A directory where the token should be cannot be read.
	other := t.TempDir()
	if err := os.Mkdir(filepath.Join(other, api.TokenFile), 0o700); err != nil {
		t.Fatal(err)
	}
	d.runWith([]string{"TT_DEVICE_LOG_DIR=" + other}, "", "--port", "5741", "status").want(t, 2, nil, []string{"token"})
}
