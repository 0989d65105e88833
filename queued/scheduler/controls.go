package scheduler

import (
	"github.com/ttkit/ttkit/queued/defaults"
	"os"
	"strconv"
	"strings"
	"time"
)

// DeviceToken is replaced by the card number in every control command.
const DeviceToken = "{device}"

// Controls are the commands a reset job runs, as shell programs (bash -c,
// like jobs) in their own process group, each bounded by its own timeout,
// with their output in the reset job's log. Recovery is a ladder
// (ladder.go): Reset, then DeepReset when set, then each Site rung, each
// rung followed by HealthCheck and the fitness gate, until one is
// verified. A command's non-zero exit, timeout or failure to start is a
// failure; its exit 0 alone proves nothing (tt-smi exits 0 even when its
// reset failed).
type Controls struct {
	// Reset resets one card. Without {device} the card number is appended
	// as its final argument.
	Reset string
	// HealthCheck proves one card works; {device} is substituted, nothing
	// is appended.
	HealthCheck string
	// DeepReset is the optional stronger reset, tried once after a failed
	// recovery; appended to like Reset.
	DeepReset string
	// Site are the site's own rungs (TT_DEVICE_RECOVERY_CMDS), climbed in
	// order after the reset and the deep reset, such as a BMC power
	// cycle; see ladder.go.
	Site []Rung
	// Timeouts per command; default TT_DEVICE_RESET_TIMEOUT's, TT_DEVICE_HEALTH_CHECK_TIMEOUT's and TT_DEVICE_DEEP_RESET_TIMEOUT's.
	ResetTimeout, HealthCheckTimeout, DeepResetTimeout time.Duration
	// Dir is the working directory of the commands; default $HOME, else /.
	Dir string
}

func (c *Controls) defaults() {
	setDur := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	setDur(&c.ResetTimeout, defaults.ResetTimeoutSeconds*time.Second)
	setDur(&c.HealthCheckTimeout, defaults.HealthCheckTimeoutSeconds*time.Second)
	setDur(&c.DeepResetTimeout, defaults.DeepResetTimeoutSeconds*time.Second)
	for i := range c.Site {
		setDur(&c.Site[i].Timeout, c.DeepResetTimeout)
	}
	if c.Dir == "" {
		c.Dir = "/"
		if home, err := os.UserHomeDir(); err == nil {
			if fi, err := os.Stat(home); err == nil && fi.IsDir() {
				c.Dir = home
			}
		}
	}
}

// total is the longest a reset can take, for the reset job's timeout field.
func (c *Controls) total() time.Duration {
	t := c.ResetTimeout + c.HealthCheckTimeout
	if c.DeepReset != "" {
		t += c.DeepResetTimeout + c.HealthCheckTimeout
	}
	for _, r := range c.Site {
		t += r.Timeout + c.HealthCheckTimeout
	}
	return t
}

// Expand substitutes the card number for {device} in a control command;
// when appendCard is set (reset commands) and the command has no {device},
// the number becomes its final argument instead.
func Expand(cmd string, card int, appendCard bool) string {
	n := strconv.Itoa(card)
	if strings.Contains(cmd, DeviceToken) {
		return strings.ReplaceAll(cmd, DeviceToken, n)
	}
	if appendCard {
		return strings.TrimRight(cmd, " \t\n") + " " + n
	}
	return cmd
}
