package doctor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func checkHidepid(h Host) Check {
	c := Check{Name: "proc-hidepid"}
	b, err := os.ReadFile(h.MountInfo)
	if err != nil {
		c.Status, c.Detail = Skip, fmt.Sprintf("reading %s: %v", h.MountInfo, err)
		return c
	}
	// mountinfo: ID parent major:minor root mountpoint options ... - fstype source superoptions
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 || f[4] != "/proc" || g[0] != "proc" {
			continue
		}
		for _, opt := range strings.Split(g[2], ",") {
			v, ok := strings.CutPrefix(opt, "hidepid=")
			if ok && v != "0" && v != "off" {
				c.Status = Warn
				c.Detail = fmt.Sprintf("/proc is mounted with hidepid=%s: otelcol-tt sees only its own user's processes, so other users' holders get no name or command line", v)
				c.Fix = "run otelcol-tt as root, or in the group named by /proc's gid= mount option (mount -o remount,hidepid=" + v + ",gid=<group> /proc)"
				return c
			}
		}
		c.Status, c.Detail = OK, "/proc is mounted without hidepid: every holder can be named"
		return c
	}
	c.Status, c.Detail = Skip, "no proc file system mounted at /proc in "+h.MountInfo
	return c
}

func checkPIDNamespace(h Host) Check {
	c := Check{Name: "pid-namespace"}
	self, errSelf := os.Readlink(h.SelfPIDNS)
	initNS, errInit := os.Readlink(h.InitPIDNS)
	var nested bool
	switch {
	case errSelf == nil && errInit == nil:
		nested = self != initNS
	default:
		// Reading PID 1's link needs root; NSpid lists this process's PID
		// in each namespace it is in, so more than one means nested.
		n, err := nsPidDepth(h.SelfStatus)
		if err != nil {
			c.Status, c.Detail = Skip, fmt.Sprintf("cannot compare PID namespaces: %v; %v", errors.Join(errInit, errSelf), err)
			return c
		}
		nested = n > 1
	}
	if nested {
		c.Status = Warn
		c.Detail = "this shell is not in the host's PID namespace (a container?): the pids files show 0 for holders outside it, and PIDs here are not the host's"
		c.Fix = "run queued and otelcol-tt in the host's PID namespace (hostPID: true, or docker run --pid=host)"
		return c
	}
	c.Status, c.Detail = OK, "this shell is in the host's PID namespace"
	return c
}

func nsPidDepth(statusFile string) (int, error) {
	b, err := os.ReadFile(statusFile)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			return len(strings.Fields(v)), nil
		}
	}
	return 0, fmt.Errorf("%s has no NSpid line", statusFile)
}

func checkUnit(h Host) Check {
	c := Check{Name: "user-unit"}
	if h.UnitDir == "" {
		c.Status, c.Detail = Skip, "no systemd user unit directory (HOME unset)"
		return c
	}
	unit := filepath.Join(h.UnitDir, "queued.service")
	if _, err := os.Stat(unit); err != nil {
		c.Status, c.Detail, c.Fix = Warn, unit+" does not exist: queued is not installed as a user service", "make install (installs the unit and enables it)"
		return c
	}
	wants := filepath.Join(h.UnitDir, "default.target.wants", "queued.service")
	if _, err := os.Lstat(wants); err != nil {
		c.Status, c.Detail, c.Fix = Warn, "queued.service is installed but not enabled: queued will not start at boot", "systemctl --user enable --now queued && loginctl enable-linger \"$USER\""
		return c
	}
	c.Status, c.Detail = OK, "queued.service is installed and enabled"
	return c
}
