package doctor_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/config"
	"github.com/ttkit/ttkit/queued/doctor"
	"github.com/ttkit/ttkit/queued/doctor/doctortest"
)

// healthy is a fake host where every check passes: two cards, tt-kmd
// 2.8.0, tt-smi and a Python with tt_umd, queued answering with a token,
// a writable store and an enabled unit.
func healthy(t *testing.T) (*doctortest.Root, doctor.Host) {
	t.Helper()
	r := doctortest.New(t, t.TempDir(), 2)
	h := doctor.Default(r.Dir)
	h.Home = r.Home
	h.UnitDir = filepath.Join(r.Home, ".config", "systemd", "user")
	h.ResetCmd = "~/tenstorrent/.venv/bin/tt-smi -r /dev/tenstorrent/{device} --no_reinit"
	h.HealthCheckCmd = "~/tenstorrent/.venv/bin/python3 " + r.Path("/home/.local/share/tt-device-queue/health_check.py") + " {device}"
	h.StateDir = r.Path("/home/.local/state/tt-device-queue/logs-v2")
	if err := os.MkdirAll(h.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := api.EnsureToken(h.StateDir); err != nil {
		t.Fatal(err)
	}
	h.QueuedAt = "a fake"
	h.Queued = func(context.Context) (api.Status, error) {
		return api.Status{Version: "test", Cards: []api.CardStatus{{DeviceID: "0", CardType: "p150a", PCIAddress: "0000:01:00.0"},
			{DeviceID: "1", CardType: "p150a", PCIAddress: "0000:02:00.0"}}, VisibleDevices: "bdf", Persistence: api.Persistence{OK: true},
			JobTracking: &api.JobTracking{Cgroup: true, AuditSession: true}}, nil
	}
	h.MinFree, h.WarnFree = 1, 2
	return r, h
}

func byName(t *testing.T, checks []doctor.Check, name string) doctor.Check {
	t.Helper()
	for _, c := range checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, checks)
	return doctor.Check{}
}

func TestHealthyHostPassesEveryCheck(t *testing.T) {
	_, h := healthy(t)
	checks := doctor.Run(context.Background(), h)
	want := []string{"kmd", "kmd-version", "device-nodes", "reset-command", "health-check", "proc-hidepid", "pid-namespace", "queued", "job-tracking", "cards", "enforcement", "gate", "card-fitness", "token", "store", "disk", "user-unit"}
	if len(checks) != len(want) {
		t.Fatalf("got %d checks, want %d: %+v", len(checks), len(want), checks)
	}
	for i, c := range checks {
		if c.Name != want[i] || c.Status != doctor.OK || c.Fix != "" || c.Detail == "" {
			t.Errorf("check %d = %+v, want %s ok with a detail and no fix", i, c, want[i])
		}
	}
	if doctor.Failed(checks) {
		t.Error("Failed is true on a healthy host")
	}
	if c := byName(t, checks, "reset-command"); !strings.Contains(c.Detail, "tt-smi 3.0.12") {
		t.Errorf("reset-command detail %q lacks tt-smi's version", c.Detail)
	}
}

// Each case breaks one part of a healthy host and names the check and the
// verdict it must get, and words its detail or fix must contain.
func TestBrokenHostGetsEachVerdict(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(r *doctortest.Root, h *doctor.Host)
		check  string
		want   doctor.Status
		words  string
	}{
		{"no KMD", func(r *doctortest.Root, h *doctor.Host) { r.Remove("/proc/driver/tenstorrent") }, "kmd", doctor.Fail, "modprobe tenstorrent"},
		{"KMD without cards", func(r *doctortest.Root, h *doctor.Host) {
			r.Remove("/proc/driver/tenstorrent/0")
			r.Remove("/proc/driver/tenstorrent/1")
		}, "kmd", doctor.Fail, "lists no card"},
		{"no KMD, so no version", func(r *doctortest.Root, h *doctor.Host) {
			r.Remove("/proc/driver/tenstorrent")
			r.Remove("/sys/module/tenstorrent")
		}, "kmd-version", doctor.Skip, "not loaded"},
		{"KMD before pids files", func(r *doctortest.Root, h *doctor.Host) { r.SetKMDVersion("2.4.1") }, "kmd-version", doctor.Fail, "no pids files"},
		{"KMD 2.5 numbers PIDs per opener", func(r *doctortest.Root, h *doctor.Host) { r.SetKMDVersion("2.5.0") }, "kmd-version", doctor.Warn, "own PID namespace"},
		{"KMD 2.7 unconfirmed", func(r *doctortest.Root, h *doctor.Host) { r.SetKMDVersion("2.7.1") }, "kmd-version", doctor.Warn, "upgrade tt-kmd to 2.8.0"},
		{"KMD version unreadable", func(r *doctortest.Root, h *doctor.Host) {
			r.Write("/sys/module/tenstorrent/version", "garbage\n", 0o444)
		}, "kmd-version", doctor.Warn, `"garbage" is not a KMD version`},
		{"card node missing for a KMD card", func(r *doctortest.Root, h *doctor.Host) {
			r.Remove("/dev/tenstorrent/1")
			h.Queued = nil
		}, "device-nodes", doctor.Warn, "cards 1 with no node"},
		{"queued serves a card with no node", func(r *doctortest.Root, h *doctor.Host) {
			h.Queued = nil
			h.Cards, h.CardsFrom = []int{0, 3}, "TT_DEVICE_IDS"
		}, "device-nodes", doctor.Fail, "no node for 3"},
		{"the running queued beats TT_DEVICE_IDS", func(r *doctortest.Root, h *doctor.Host) {
			h.Cards, h.CardsFrom = []int{0, 3}, "TT_DEVICE_IDS"
		}, "device-nodes", doctor.OK, "cards 0, 1 (from queued)"},
		{"no device nodes", func(r *doctortest.Root, h *doctor.Host) { r.Remove("/dev/tenstorrent") }, "device-nodes", doctor.Fail, "no card node"},
		{"no tt-smi", func(r *doctortest.Root, h *doctor.Host) { r.Remove("/fakebin/tt-smi") }, "reset-command", doctor.Fail, "pip install tt-smi"},
		{"tt-smi broken", func(r *doctortest.Root, h *doctor.Host) {
			r.Write("/fakebin/tt-smi", "#!/bin/sh\necho 'ImportError: libfoo' >&2\nexit 1\n", 0o755)
		}, "reset-command", doctor.Fail, "ImportError: libfoo"},
		{"custom reset program", func(r *doctortest.Root, h *doctor.Host) { h.ResetCmd = "true {device}" }, "reset-command", doctor.OK, "custom reset program"},
		{"no tt_umd", func(r *doctortest.Root, h *doctor.Host) {
			r.Write("/fakebin/python3", "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'tt_umd'\" >&2\nexit 1\n", 0o755)
		}, "health-check", doctor.Fail, "No module named 'tt_umd'"},
		{"health check script missing", func(r *doctortest.Root, h *doctor.Host) {
			r.Remove("/home/.local/share/tt-device-queue/health_check.py")
		}, "health-check", doctor.Fail, "make install"},
		{"custom health check", func(r *doctortest.Root, h *doctor.Host) { h.HealthCheckCmd = "true {device}" }, "health-check", doctor.Skip, "not a Python interpreter"},
		{"hidepid", func(r *doctortest.Root, h *doctor.Host) {
			r.SetMounts("rw,nosuid,nodev,noexec,relatime,hidepid=invisible")
		}, "proc-hidepid", doctor.Warn, "hidepid=invisible"},
		{"hidepid off", func(r *doctortest.Root, h *doctor.Host) { r.SetMounts("rw,hidepid=0") }, "proc-hidepid", doctor.OK, "without hidepid"},
		{"no /proc mount", func(r *doctortest.Root, h *doctor.Host) {
			r.Write("/proc/self/mountinfo", "21 1 8:1 / / rw - ext4 /dev/sda1 rw\n", 0o644)
		}, "proc-hidepid", doctor.Skip, "no proc file system"},
		{"container PID namespace", func(r *doctortest.Root, h *doctor.Host) { r.SetPIDNamespaces("pid:[4026531836]", "pid:[4026532511]") }, "pid-namespace", doctor.Warn, "hostPID"},
		{"PID 1 unreadable, NSpid nested", func(r *doctortest.Root, h *doctor.Host) {
			r.Remove("/proc/1")
			r.Write("/proc/self/status", "NSpid:\t91234\t7\n", 0o644)
		}, "pid-namespace", doctor.Warn, "not in the host's PID namespace"},
		{"PID 1 unreadable, NSpid flat", func(r *doctortest.Root, h *doctor.Host) { r.Remove("/proc/1") }, "pid-namespace", doctor.OK, "host's PID namespace"},
		{"nothing to compare", func(r *doctortest.Root, h *doctor.Host) {
			r.Remove("/proc/1")
			r.Remove("/proc/self/status")
		}, "pid-namespace", doctor.Skip, "cannot compare"},
		{"queued down", func(r *doctortest.Root, h *doctor.Host) {
			h.Queued = func(context.Context) (api.Status, error) { return api.Status{}, errors.New("connection refused") }
		}, "queued", doctor.Fail, "systemctl --user start queued"},
		{"queued store failing", func(r *doctortest.Root, h *doctor.Host) {
			h.Queued = func(context.Context) (api.Status, error) {
				return api.Status{Persistence: api.Persistence{Error: "no space left on device"}}, nil
			}
		}, "queued", doctor.Fail, "no space left"},
		{"no token", func(r *doctortest.Root, h *doctor.Host) { os.Remove(filepath.Join(h.StateDir, api.TokenFile)) }, "token", doctor.Fail, "has not run"},
		{"state dir missing", func(r *doctortest.Root, h *doctor.Host) { os.RemoveAll(h.StateDir) }, "store", doctor.Skip, "does not exist yet"},
		{"state dir not a directory", func(r *doctortest.Root, h *doctor.Host) {
			// Not searchable even by root, who passes any write check.
			os.RemoveAll(h.StateDir)
			r.Write("/home/.local/state/tt-device-queue/logs-v2", "", 0o600)
		}, "store", doctor.Fail, "is not writable"},
		{"disk nearly full", func(r *doctortest.Root, h *doctor.Host) { h.MinFree = 1 << 62 }, "disk", doctor.Fail, "cannot record jobs"},
		{"disk getting full", func(r *doctortest.Root, h *doctor.Host) { h.WarnFree = 1 << 62 }, "disk", doctor.Warn, "TT_DEVICE_MAX_OUTPUT_BYTES"},
		{"disk of a state dir not made yet", func(r *doctortest.Root, h *doctor.Host) { os.RemoveAll(h.StateDir) }, "disk", doctor.OK, "free on the file system of"},
		{"no unit", func(r *doctortest.Root, h *doctor.Host) { r.Remove("/home/.config/systemd/user") }, "user-unit", doctor.Warn, "make install"},
		{"unit not enabled", func(r *doctortest.Root, h *doctor.Host) { r.Remove("/home/.config/systemd/user/default.target.wants") }, "user-unit", doctor.Warn, "systemctl --user enable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, h := healthy(t)
			tc.break_(r, &h)
			checks := doctor.Run(context.Background(), h)
			c := byName(t, checks, tc.check)
			if c.Status != tc.want || !strings.Contains(c.Detail+" fix: "+c.Fix, tc.words) {
				t.Fatalf("%s = %+v, want %s mentioning %q", tc.check, c, tc.want, tc.words)
			}
			if (c.Status == doctor.Fail || c.Status == doctor.Warn) && c.Fix == "" {
				t.Errorf("%s is %s with no fix", tc.check, c.Status)
			}
		})
	}
}

func TestWriteTextShowsFixesAndCounts(t *testing.T) {
	var b bytes.Buffer
	err := doctor.WriteText(&b, []doctor.Check{
		{Name: "kmd", Status: doctor.OK, Detail: "lists cards 0"},
		{Name: "queued", Status: doctor.Fail, Detail: "does not answer", Fix: "start it"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "ok    kmd     lists cards 0\nfail  queued  does not answer\n              fix: start it\n\n1 ok, 0 warnings, 1 failed, 0 skipped\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// Against a system-mode queued the checks of a user's own daemon (its
// token, store, disk, unit, and the reset commands in the user's home)
// do not apply: they skip, saying why, and doctor passes.
func TestSystemModeSkipsTheUserDaemonsChecks(t *testing.T) {
	_, h := healthy(t)
	os.RemoveAll(h.StateDir)
	os.RemoveAll(h.UnitDir)
	h.Queued = func(context.Context) (api.Status, error) {
		return api.Status{Version: "test", Mode: "system", Cards: []api.CardStatus{{DeviceID: "0"}}, Persistence: api.Persistence{OK: true}}, nil
	}
	h.ResetCmd = "/nonexistent/tt-smi -r {device}"
	checks := doctor.Run(context.Background(), h)
	if doctor.Failed(checks) {
		t.Errorf("doctor failed against a system-mode queued: %+v", checks)
	}
	for _, name := range []string{"token", "store", "disk", "user-unit", "reset-command", "health-check"} {
		if c := byName(t, checks, name); c.Status != doctor.Skip || !strings.Contains(c.Detail, "system mode") {
			t.Errorf("%s: %s %q, want a skip that says system mode", name, c.Status, c.Detail)
		}
	}
	if c := byName(t, checks, "queued"); c.Status != doctor.OK || !strings.Contains(c.Detail, "system mode") {
		t.Errorf("queued: %s %q", c.Status, c.Detail)
	}
}

// One list of checks for every mode, in one order: a mode only says which
// of them skip.
func TestEveryModeListsTheSameChecks(t *testing.T) {
	_, h := healthy(t)
	user := doctor.Run(context.Background(), h)
	h.Queued = func(context.Context) (api.Status, error) {
		return api.Status{Version: "test", Mode: api.SystemMode, Persistence: api.Persistence{OK: true}}, nil
	}
	system := doctor.Run(context.Background(), h)
	if len(user) != len(system) {
		t.Fatalf("%d checks in user mode, %d in system mode", len(user), len(system))
	}
	for i := range user {
		if user[i].Name != system[i].Name {
			t.Errorf("check %d: %s in user mode, %s in system mode", i, user[i].Name, system[i].Name)
		}
	}
}

// The settings check reads queued's settings as queued would: from the
// declaration, naming a bad one with its value, and listing those given.
func TestCheckSettings(t *testing.T) {
	lookup := func(m map[string]string) config.Lookup {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	cfg, c := doctor.CheckSettings(lookup(map[string]string{"HOME": "/h"}), "the test")
	if c.Name != "settings" || c.Status != doctor.OK || c.Detail != "queued's settings (the test) are valid; each is its default" || cfg.MaxQueued != 1000 {
		t.Errorf("defaults: %+v, %d", c, cfg.MaxQueued)
	}
	cfg, c = doctor.CheckSettings(lookup(map[string]string{"HOME": "/h", "TT_DEVICE_MAX_QUEUED_JOBS": "5", "TT_DEVICE_IDS": "0,1"}), "the test")
	if c.Status != doctor.OK || !strings.HasSuffix(c.Detail, "given: TT_DEVICE_IDS=0,1, TT_DEVICE_MAX_QUEUED_JOBS=5") || cfg.MaxQueued != 5 {
		t.Errorf("given: %+v, %d", c, cfg.MaxQueued)
	}
	cfg, c = doctor.CheckSettings(lookup(map[string]string{"HOME": "/h", "TT_DEVICE_MAX_QUEUED_JOBS": "0"}), "the test")
	if c.Status != doctor.Fail || c.Detail != `TT_DEVICE_MAX_QUEUED_JOBS="0": want a whole number of at least 1` || c.Fix == "" || cfg.MaxQueued != 1000 {
		t.Errorf("bad: %+v, %d", c, cfg.MaxQueued)
	}
}

// Several cards, tt-umd installed and queued leaving TT_VISIBLE_DEVICES
// alone: a tt-metal job opens cards it was not queued for, and doctor
// says so and what to do; it names each card's board.
func TestCards_WarnsWhenJobsSeeEveryCard(t *testing.T) {
	_, h := healthy(t)
	h.Queued = func(context.Context) (api.Status, error) {
		return api.Status{Version: "test", Cards: []api.CardStatus{{DeviceID: "0", CardType: "n300", PCIAddress: "0000:04:00.0"},
			{DeviceID: "1", CardType: "n300", PCIAddress: "0000:05:00.0"}}, VisibleDevices: "off", Persistence: api.Persistence{OK: true}}, nil
	}
	c := byName(t, doctor.Run(context.Background(), h), "cards")
	if c.Status != doctor.Warn || !strings.Contains(c.Detail, "card 1 n300 at 0000:05:00.0") || !strings.Contains(c.Fix, "TT_DEVICE_VISIBLE=bdf") {
		t.Errorf("cards check: %+v", c)
	}
}

// TestCards_WarnsWhenTheHostHasMoreCardsThanQueuedServes: a tt-metal job
// opens every card on the host, not only those queued serves, so one
// card served (TT_DEVICE_IDS=0) on a host of four is warned about too.
func TestCards_WarnsWhenTheHostHasMoreCardsThanQueuedServes(t *testing.T) {
	_, h := healthy(t)
	r := doctortest.New(t, t.TempDir(), 4)
	h.DevDir = r.Path("/dev/tenstorrent")
	h.Queued = func(context.Context) (api.Status, error) {
		return api.Status{Version: "test", Cards: []api.CardStatus{{DeviceID: "0", CardType: "p150a", PCIAddress: "0000:01:00.0"}},
			VisibleDevices: "off", Persistence: api.Persistence{OK: true}}, nil
	}
	c := byName(t, doctor.Run(context.Background(), h), "cards")
	if c.Status != doctor.Warn || !strings.Contains(c.Detail, "4 cards on the host") || !strings.Contains(c.Fix, "TT_DEVICE_VISIBLE=bdf") {
		t.Errorf("cards check: %+v", c)
	}
}

// TestCheckSettings_SharesOfASharedQueued: in system mode the settings
// check says what one user may have, each per-user bound as given or its
// default share of its total.
func TestCheckSettings_SharesOfASharedQueued(t *testing.T) {
	env := map[string]string{"HOME": "/h", "TT_DEVICE_SOCKET": "/run/tt-device-queue/queued.sock",
		"TT_DEVICE_MAX_QUEUED_JOBS": "2000", "TT_DEVICE_HTTP_WORKERS_PER_USER": "2"}
	_, c := doctor.CheckSettings(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, "the test")
	want := "each user may have 500 of the 2000 queued jobs, 2500 finished jobs, 1 GiB of output, 64 connections, 32 long-polls waiting and 2 handlers at once"
	if c.Status != doctor.OK || !strings.Contains(c.Detail, want) {
		t.Fatalf("settings check %+v; want it to say %q", c, want)
	}
}

// TestQueuedCheck_SharesOfARunningSharedQueued: asked, a system-mode
// queued says what each user may have, and doctor shows it.
func TestQueuedCheck_SharesOfARunningSharedQueued(t *testing.T) {
	_, h := healthy(t)
	h.Queued = func(context.Context) (api.Status, error) {
		return api.Status{Version: "test", Mode: api.SystemMode, Cards: []api.CardStatus{{DeviceID: "0"}}, Persistence: api.Persistence{OK: true},
			MaxQueued: 1000, MaxQueuedPerUser: 250, MaxCompletedPerUser: 2500, Output: api.Output{MaxBytesPerUser: 1 << 30},
			HTTP: api.HTTPStatus{ConnsPerUser: 64, WaitsPerUser: 32, WorkersPerUser: 4}}, nil
	}
	c := byName(t, doctor.Run(context.Background(), h), "queued")
	want := "each user may have 250 of the 1000 queued jobs, 2500 finished jobs, 1 GiB of output, 64 connections, 32 long-polls waiting and 4 handlers at once"
	if c.Status != doctor.OK || !strings.Contains(c.Detail, want) {
		t.Fatalf("queued check %+v; want it to say %q", c, want)
	}
}
