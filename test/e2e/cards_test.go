//go:build e2e

package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

const (
	// queuedJobEnv and queuedJobID are queued's job marker, as a job's
	// process carries it.
	queuedJobEnv = "TT_QUEUE_JOB_ID"
	queuedJobID  = "0123456789abcdef0123456789abcdef"
	// stallWindow is the host collector's heartbeat_stall_window. The
	// fake sysfs's heartbeat never moves, so it reads stalled after this.
	stallWindow = 3 * time.Second
)

// checkCardHealth checks, through the real Prometheus, every card-health
// series of the host collector (a Blackhole p150's sysfs) and of the
// container collector (a Wormhole n300's, which has no fan and no thermal
// trip count), under the exact names the exporter gives them, with their
// values in SI units; then that the heartbeat, which never moves in the
// fake tree, reads stalled once the window has passed.
func checkCardHealth(t *testing.T, prom string) {
	t.Helper()
	host := fmt.Sprintf(`hostname=%q, device="0"`, hostName)
	for _, c := range []struct {
		query, want string
	}{
		{`tt_device_temperature_celsius{` + host + `, sensor="asic_temp"}`, "61.25"},
		{`tt_device_temperature_max_celsius{` + host + `, sensor="asic_temp"}`, "90"},
		{`tt_device_power_watts{` + host + `, sensor="power"}`, "86.125"},
		{`tt_device_power_max_watts{` + host + `}`, "300"},
		{`tt_device_voltage_volts{` + host + `, sensor="vcore"}`, "0.765"},
		{`tt_device_voltage_max_volts{` + host + `}`, "0.9"},
		{`tt_device_current_amperes{` + host + `, sensor="current"}`, "112.5"},
		{`tt_device_current_max_amperes{` + host + `}`, "250"},
		{`tt_device_fan_speed_per_min{` + host + `, sensor="fan"}`, "2430"},
		{`tt_device_fan_speed_max_per_min{` + host + `}`, "6000"},
		{`tt_device_clock_hertz{` + host + `, clock="aiclk"}`, "1350000000"},
		{`tt_device_clock_hertz{` + host + `, clock="axiclk"}`, "1000000000"},
		{`tt_device_clock_hertz{` + host + `, clock="arcclk"}`, "800000000"},
		{`tt_device_thermal_trips_total{` + host + `}`, "2"},
		{`tt_device_info{` + host + `, card_type="p150a", serial="0000042731206152", asic_id="7C2E91D4A0B35F18", firmware="18.7.0.0", m3app_firmware="0.24.0.0"}`, "1"},
		{fmt.Sprintf(`tt_device_temperature_celsius{hostname=%q, device="0"}`, containerName), "48.5"},
		{fmt.Sprintf(`tt_device_info{hostname=%q, card_type="n300", firmware="18.4.0.0"}`, containerName), "1"},
	} {
		got := waitQuery(t, prom, c.query, 30*time.Second, func(r []sample) bool { return len(r) == 1 })
		if got[0].Value != c.want {
			t.Errorf("%s = %s, want %s", c.query, got[0].Value, c.want)
		}
	}
	t.Logf("card health of %s and %s: every series under its name, in SI units", hostName, containerName)
	for _, absent := range []string{"tt_device_fan_speed_per_min", "tt_device_thermal_trips_total"} {
		q := fmt.Sprintf(`%s{hostname=%q}`, absent, containerName)
		if got := query(t, prom, q); len(got) != 0 {
			t.Errorf("%s = %s; the n300 reports no such attribute", q, render(got))
		}
	}
	stalled := fmt.Sprintf(`tt_device_heartbeat_stalled{hostname=%q}`, hostName)
	got := waitQuery(t, prom, stalled, stallWindow+10*scrapeInterval, func(r []sample) bool {
		return len(r) == 1 && r[0].Value == "1"
	})
	t.Logf("%s -> %s after the heartbeat stood still for %s", stalled, render(got), stallWindow)
}

// podCgroup is a real cgroup named as the kubelet's cgroupfs driver names a
// container's: kubepods/besteffort/pod<uid>/<container id>, in the pids
// hierarchy of a cgroup v1 host or in the unified one.
type podCgroup struct {
	uid, container string
	dirs           []string // created, innermost last
}

func newPodCgroup(t *testing.T) *podCgroup {
	t.Helper()
	root := "/sys/fs/cgroup/pids"
	if _, err := os.Stat(root); err != nil {
		root = "/sys/fs/cgroup"
	}
	b := make([]byte, 48)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	h := hex.EncodeToString(b)
	c := &podCgroup{uid: h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32], container: h[32:96]}
	dir := root
	for _, elem := range []string{"kubepods", "besteffort", "pod" + c.uid, c.container} {
		dir = filepath.Join(dir, elem)
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			if os.Getenv("CI") != "" {
				t.Fatalf("creating a pod's cgroup: %v (CI runs as root)", err)
			}
			t.Skipf("creating a pod's cgroup needs root: %v", err)
		}
		c.dirs = append(c.dirs, dir)
	}
	// Removed once the process in it has exited: this cleanup is
	// registered before the process's own, so it runs after it.
	t.Cleanup(func() {
		for i := len(c.dirs) - 1; i >= 0; i-- {
			// The kernel lets go of an exited process's cgroup a
			// moment after it is reaped: poll with a deadline.
			deadline := time.Now().Add(10 * time.Second)
			for {
				err := os.Remove(c.dirs[i])
				if err == nil || os.IsNotExist(err) || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	})
	return c
}

// enter moves pid into the container's cgroup.
func (c *podCgroup) enter(t *testing.T, pid int) {
	t.Helper()
	procs := filepath.Join(c.dirs[len(c.dirs)-1], "cgroup.procs")
	if err := os.WriteFile(procs, []byte(strconv.Itoa(pid)), 0o644); err != nil {
		t.Fatalf("moving pid %d into %s: %v", pid, procs, err)
	}
}

// checkPodHolder checks that the process in a pod's container carries its
// container_id and k8s_pod_uid, read from its real cgroup.
func checkPodHolder(t *testing.T, prom string, pid int, c *podCgroup) {
	t.Helper()
	sel := fmt.Sprintf(`tt_process{hostname=%q, pid="%d"}`, hostName, pid)
	got := waitQuery(t, prom, sel, 10*time.Second, func(r []sample) bool { return len(r) == 1 })
	if got[0].Metric["container_id"] != c.container || got[0].Metric["k8s_pod_uid"] != c.uid {
		t.Errorf("%s -> %s; want container_id %s and k8s_pod_uid %s", sel, render(got), c.container, c.uid)
	}
	t.Logf("the holder in a pod's container: %s", render(got))
}
