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
// with their output in the reset job's log. Recovery is: Reset, then
// HealthCheck, which must pass; if either fails and DeepReset is set,
// DeepReset and then HealthCheck again. A command's non-zero exit, timeout
// or failure to start is a failure; only a passing health check proves the
// card works (tt-smi exits 0 even when its reset failed).
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
