package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// healthCheck runs ../../health_check.py with python3 and the stub tt_umd
// on PYTHONPATH (unless noModule), in the given stub mode, with device
// nodes 0 and 1 in a fake device directory. It returns the exit code,
// stdout, stderr and the stub's call log.
func healthCheck(t *testing.T, mode string, noModule bool, args ...string) (int, string, string, string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is needed to test health_check.py")
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "health_check.py"))
	if err != nil {
		t.Fatal(err)
	}
	stub, err := filepath.Abs(filepath.Join("testdata", "stub"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	devDir := filepath.Join(dir, "dev")
	for _, n := range []string{"0", "1"} {
		if err := os.MkdirAll(devDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(devDir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	callLog := filepath.Join(dir, "calls")
	pythonPath := stub
	if noModule {
		pythonPath = dir // no tt_umd there
	}
	// -S: no site-packages, so an installed tt_umd cannot stand in for
	// the stub or for its absence.
	cmd := exec.Command(py, append([]string{"-S", script}, args...)...)
	cmd.Env = append(env(), "PYTHONPATH="+pythonPath, "TT_STUB_UMD="+mode, "TT_STUB_UMD_LOG="+callLog,
		"TT_HEALTH_CHECK_DEV_DIR="+devDir, "PYTHONDONTWRITEBYTECODE=1")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	calls, _ := os.ReadFile(callLog)
	return code, stdout.String(), stderr.String(), strings.TrimSpace(string(calls))
}

func TestHealthCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		mode     string
		noModule bool
		args     []string
		code     int
		stdout   string
		stderr   string
		calls    string // checked unless empty; "none" wants no call at all
	}{
		{name: "healthy", mode: "ok", args: []string{"1"}, code: 0,
			stdout: "card 1 healthy: AICLK 1000 MHz, ARCCLK 540 MHz\n", calls: "create 1\ninit_tt_device\nget_aiclk"},
		{name: "older tt_umd without a firmware info provider", mode: "reader_only", args: []string{"0"}, code: 0,
			stdout: "card 0 healthy: AICLK 1000 MHz\n", calls: "create 0\ninit_tt_device\nread_entry 14"},
		{name: "zero clock", mode: "zero", args: []string{"0"}, code: 7,
			stderr: "health_check: card 0: AICLK reads 0 MHz, the AI clock is not running (AICLK 0 MHz, ARCCLK 540 MHz)\n"},
		{name: "zero clock from raw telemetry", mode: "zero,reader_only", args: []string{"0"}, code: 7,
			stderr: "AICLK reads 0 MHz"},
		{name: "init fails", mode: "init_fail", args: []string{"0"}, code: 5,
			stderr: "health_check: card 0: initialization failed: RuntimeError: timed out waiting for ARC to start\n"},
		{name: "open fails", mode: "create_fail", args: []string{"1"}, code: 4,
			stderr: "card 1: tt_umd cannot open"},
		{name: "telemetry fails", mode: "telemetry_fail", args: []string{"0"}, code: 6,
			stderr: "card 0: reading clock telemetry failed: RuntimeError: ARC did not answer"},
		{name: "no device node", mode: "ok", args: []string{"5"}, code: 4,
			stderr: "card 5: device node", calls: "none"},
		{name: "module missing", mode: "ok", noModule: true, args: []string{"0"}, code: 3,
			stderr: "cannot import tt_umd"},
		{name: "no argument", mode: "ok", code: 2, stderr: "usage: health_check.py DEVICE"},
		{name: "bad argument", mode: "ok", args: []string{"/dev/tenstorrent/0"}, code: 2, stderr: "is not a card number"},
		{name: "leading zero", mode: "ok", args: []string{"01"}, code: 2, stderr: "is not a card number"},
		{name: "two arguments", mode: "ok", args: []string{"0", "1"}, code: 2, stderr: "usage:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr, calls := healthCheck(t, tc.mode, tc.noModule, tc.args...)
			if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q", code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
			}
			if code != 0 && (stderr == "" || strings.Count(strings.TrimSpace(stderr), "\n") != 0) {
				t.Fatalf("a failure must say why in one line on stderr: %q", stderr)
			}
			if tc.calls == "none" && calls != "" || tc.calls != "" && tc.calls != "none" && calls != tc.calls {
				t.Fatalf("tt_umd calls %q, want %q", calls, tc.calls)
			}
			if strings.Contains(calls, "enumerate") || strings.Count(calls, "create") > 1 {
				t.Fatalf("the check touched more than its card: %q", calls)
			}
		})
	}
}
