//go:build e2e

package e2e

import (
	"fmt"
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
