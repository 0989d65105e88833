package doctor

import (
	"github.com/ttkit/ttkit/queued/api"
)

// trackingFix is how an administrator gives queued a cgroup to delegate.
const trackingFix = "set Delegate=yes in queued's unit (deploy/systemd/queued-system.service or queued.service do), then restart queued"

// escapes is what a job can leave running past its end and its kill on a
// host without a cgroup per job, whatever else holds it.
const escapes = "processes started through another service: systemd-run --user, at, cron, ssh to this host, D-Bus activation"

// checkJobTracking says what holds the running queued's jobs, and what a
// job's processes can do to outlive its end and its kill without a cgroup
// per job.
func checkJobTracking(s *api.Status) Check {
	c := Check{Name: "job-tracking"}
	switch {
	case s == nil:
		c.Status, c.Detail = Skip, "queued does not answer"
	case s.JobTracking == nil:
		c.Status, c.Detail = Skip, "this queued does not say how it tracks jobs (older than this doctor)"
	case s.JobTracking.Cgroup:
		c.Status = OK
		c.Detail = "each job runs in a cgroup of its own: a kill reaches every process it started, whatever it did to its session, group or environment; still outside: " + escapes
	case s.JobTracking.AuditSession:
		c.Status, c.Fix = Warn, trackingFix
		c.Detail = "no delegated cgroup (" + s.JobTracking.Detail + "): jobs are found by process group, session, audit session and marker, " +
			"which a setsid, a double fork or a changed environment do not shed; what escapes: " + escapes +
			"; and no task limit per job (TT_DEVICE_JOB_TASKS_MAX is not enforced)"
	default:
		c.Status, c.Fix = Warn, trackingFix+"; or run queued as a service (an unset loginuid) or with CAP_AUDIT_CONTROL, for an audit session per job"
		c.Detail = "neither a delegated cgroup nor an audit session per job (" + s.JobTracking.Detail + "): jobs are found by process group, session and marker only, " +
			"so a job's process that leaves its session and drops TT_QUEUE_JOB_ID (env -u TT_QUEUE_JOB_ID setsid -f ...) outlives its job's end and kill and may hold the card; also escapes: " + escapes
	}
	return c
}
