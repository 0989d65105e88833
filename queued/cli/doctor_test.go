package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/doctor"
	"github.com/ttkit/ttkit/queued/doctor/doctortest"
)

// doctorEnv is the environment that points doctor at a fake host r: its
// home (for ~/tenstorrent/.venv, the unit and queued.env), its driver tree,
// and the health check installed in it.
func doctorEnv(r *doctortest.Root) []string {
	return []string{
		"HOME=" + r.Home,
		"TT_DEVICE_DRIVER_PATH=" + r.KMD.Dir,
		"TT_DEVICE_HEALTH_CHECK_CMD=~/tenstorrent/.venv/bin/python3 " + r.Path("/home/.local/share/tt-device-queue/health_check.py") + " {device}",
	}
}

// runDoctor runs the real CLI's doctor with env alone (no daemon helper).
func runDoctor(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "tt-device-queue"), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	return runCmd(t, cmd)
}

func decodeChecks(t *testing.T, r result) map[string]doctor.Check {
	t.Helper()
	var checks []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &checks); err != nil {
		t.Fatalf("doctor --json printed no JSON array: %v\n%s", err, r)
	}
	out := map[string]doctor.Check{}
	for _, c := range checks {
		for _, key := range []string{"name", "status", "detail"} {
			if s, ok := c[key].(string); !ok || s == "" {
				t.Errorf("check %v has no %s", c, key)
			}
		}
		st := doctor.Status(c["status"].(string))
		if st != doctor.OK && st != doctor.Warn && st != doctor.Fail && st != doctor.Skip {
			t.Errorf("check %v has status %q", c, st)
		}
		fix, _ := c["fix"].(string)
		out[c["name"].(string)] = doctor.Check{Name: c["name"].(string), Status: st, Detail: c["detail"].(string), Fix: fix}
	}
	return out
}

// With queued running on the fake host's driver tree, and each job seeing
// only its own cards (TT_DEVICE_VISIBLE=bdf), every check passes
// and doctor exits 0, in text and in JSON.
func TestDoctorOnHealthyHostWithDaemon(t *testing.T) {
	r := doctortest.New(t, t.TempDir(), 2)
	d := startDaemon(t, "TT_DEVICE_DRIVER_PATH="+r.KMD.Dir, "TT_DEVICE_VISIBLE=bdf")
	env := append(doctorEnv(r), "TT_DEVICE_LOG_DIR="+d.state)
	res := runDoctor(t, env, "doctor", "--root", r.Dir)
	if res.code != 0 || !strings.Contains(res.stdout, "ok    queued ") || strings.Contains(res.stdout, "fail  ") ||
		!strings.Contains(res.stdout, " answers at unix://"+filepath.Join(d.state, api.SocketFile)+",") {
		t.Fatalf("doctor on a healthy host:\n%s", res)
	}
	// The gate's settings come from queued's settings, as queued reads them.
	res = runDoctor(t, append(env, "TT_DEVICE_GATE_CMD=tt-smi -s {device}", "TT_DEVICE_GATE_TIMEOUT=45"), "--json", "doctor", "--root", r.Dir)
	checks := decodeChecks(t, res)
	if res.code != 0 || len(checks) != 18 {
		t.Fatalf("doctor --json: %d checks\n%s", len(checks), res)
	}
	for name, c := range checks {
		// The test host's own disk and cgroup: a warning there is the
		// host's, not the daemon's.
		if c.Status != doctor.OK && !((name == "disk" || name == "job-tracking") && c.Status == doctor.Warn) {
			t.Errorf("%s = %+v, want ok", name, c)
		}
	}
	if c := checks["gate"]; !strings.Contains(c.Detail, "site probe `tt-smi -s {device}` within 45s") {
		t.Errorf("gate does not show TT_DEVICE_GATE_CMD: %+v", c)
	}
	if c := checks["card-fitness"]; !strings.Contains(c.Detail, "card 1: node, sysfs entry, heartbeat moving") {
		t.Errorf("card-fitness: %+v", c)
	}
	if c := checks["device-nodes"]; !strings.Contains(c.Detail, "cards 0, 1 (from queued)") {
		t.Errorf("device-nodes does not name queued's cards: %+v", c)
	}
}

// Without a daemon the command still runs every check: those that need
// queued fail or skip with the fix, and it exits 1.
func TestDoctorWithoutDaemon(t *testing.T) {
	r := doctortest.New(t, t.TempDir(), 2)
	env := append(doctorEnv(r), "TT_DEVICE_LOG_DIR="+filepath.Join(t.TempDir(), "never-ran"))
	res := runDoctor(t, env, "doctor", "--root", r.Dir)
	res.want(t, 1, []string{"fail  queued         queued is not running: nothing listens at its socket in ", " nor at the host's shared socket " + api.SystemSocket, "fix: systemctl --user start queued", "fail  token ", "skip  store ", "ok    kmd "}, nil)
	checks := decodeChecks(t, runDoctor(t, env, "--json", "doctor", "--root", r.Dir))
	for name, want := range map[string]doctor.Status{"queued": doctor.Fail, "token": doctor.Fail, "store": doctor.Skip, "kmd": doctor.OK, "device-nodes": doctor.OK} {
		if c := checks[name]; c.Status != want || (want == doctor.Fail && c.Fix == "") {
			t.Errorf("%s = %+v, want %s", name, c, want)
		}
	}
}

// The settings doctor checks are queued's: queued.env's, with this
// environment on top. A card in TT_DEVICE_IDS with no node fails; an old
// KMD only warns, so doctor exits 0.
func TestDoctorReadsQueuedEnv(t *testing.T) {
	r := doctortest.New(t, t.TempDir(), 2)
	r.SetKMDVersion("2.5.0")
	r.Write("/home/.config/tt-device-queue/queued.env", "# cards\nTT_DEVICE_IDS=0,1\n", 0o644)
	d := startDaemon(t, "TT_DEVICE_DRIVER_PATH="+r.KMD.Dir, "TT_DEVICE_VISIBLE=bdf")
	env := append(doctorEnv(r), "TT_DEVICE_LOG_DIR="+d.state)
	checks := decodeChecks(t, runDoctor(t, env, "--json", "doctor", "--root", r.Dir))
	if c := checks["kmd-version"]; c.Status != doctor.Warn {
		t.Errorf("kmd-version on 2.5.0 = %+v, want warn", c)
	}
	res := runDoctor(t, env, "doctor", "--root", r.Dir)
	res.want(t, 0, []string{"warn  kmd-version "}, nil)

	// queued.env names a card the host lacks, and no queued answers.
	r.Write("/home/.config/tt-device-queue/queued.env", "TT_DEVICE_IDS=0,5\n", 0o644)
	env = append(doctorEnv(r), "TT_DEVICE_LOG_DIR="+filepath.Join(t.TempDir(), "none"))
	checks = decodeChecks(t, runDoctor(t, env, "--json", "doctor", "--root", r.Dir))
	if c := checks["device-nodes"]; c.Status != doctor.Fail || !strings.Contains(c.Detail, "(from TT_DEVICE_IDS)") {
		t.Errorf("device-nodes with TT_DEVICE_IDS=0,5 = %+v, want fail", c)
	}
	// The environment wins over queued.env.
	checks = decodeChecks(t, runDoctor(t, append(env, "TT_DEVICE_IDS=1"), "--json", "doctor", "--root", r.Dir))
	if c := checks["device-nodes"]; c.Status != doctor.OK {
		t.Errorf("device-nodes with TT_DEVICE_IDS=1 in the environment = %+v, want ok", c)
	}
	// A bad setting is a failed check, not a crash.
	checks = decodeChecks(t, runDoctor(t, append(env, "TT_DEVICE_IDS=x"), "--json", "doctor", "--root", r.Dir))
	if c := checks["settings"]; c.Status != doctor.Fail || !strings.Contains(c.Detail, `"x"`) {
		t.Errorf("settings with TT_DEVICE_IDS=x = %+v, want fail naming the value", c)
	}
}

func TestDoctorRootMustBeAbsolute(t *testing.T) {
	res := runDoctor(t, []string{"HOME=" + t.TempDir()}, "doctor", "--root", "host")
	res.want(t, 2, nil, []string{`--root "host": want an absolute path`})
}
