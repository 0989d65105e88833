package ttprocessreceiver // import "github.com/ttkit/ttkit/receiver/ttprocessreceiver"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/ttkit/ttkit/internal/procscan"
	"github.com/ttkit/ttkit/receiver/ttprocessreceiver/internal/metadata"
)

// AttributionConfig switches on the tt_process labels that say whose each
// holder is. Each is off by default, and a label that is off is absent, so
// the default output is the seed's four labels. Like command_line, each is
// read once, when the process is first seen, and never changes.
type AttributionConfig struct {
	// User adds user: the owner of /proc/<pid>, by name (the decimal UID
	// when the collector's user database has no entry for it).
	User bool `mapstructure:"user"`
	// QueuedJob adds queued_job: the id of the queued job the process
	// belongs to, from TT_QUEUE_JOB_ID in /proc/<pid>/environ, which
	// queued sets in every job and every process a job starts inherits;
	// NoQueuedJob ("none") for a process of no queued job: not empty,
	// since Prometheus drops an empty label and "no job" could then not be
	// told from a collector without the label. Reading another user's
	// environment needs CAP_SYS_PTRACE: without it, such a holder's label
	// is <unknown>. It is a claim, not proof: any process may set
	// TT_QUEUE_JOB_ID, to any job's id, and the collector has no record
	// of queued's to check it against (queued's own status and metrics
	// prove membership by cgroup, session and uid instead).
	QueuedJob bool `mapstructure:"queued_job"`
	// QueuedAgent adds queued_agent: the AI agent that queued the
	// process's job through tt-device-queue mcp, from TT_QUEUE_AGENT in
	// /proc/<pid>/environ, which queued sets only in an agent's job; empty
	// for a person's job or no job. It lets a dashboard tell an agent's
	// work on a card from a person's. The same read, the same
	// CAP_SYS_PTRACE, and the same caveat as queued_job: a claim.
	QueuedAgent bool `mapstructure:"queued_agent"`
	// SlurmJob adds slurm_job: the Slurm job id of the process's cgroup,
	// only when that cgroup is under slurmd's cgroup root
	// (/slurm/uid_<uid>/job_<id> in cgroup v1,
	// /system.slice/slurmstepd.scope/job_<id> in v2) and its job
	// directory is root's: a user's delegated systemd subtree can hold any
	// directory name the user likes.
	SlurmJob bool `mapstructure:"slurm_job"`
	// ContainerID adds container_id: the container the process runs in,
	// from /proc/<pid>/cgroup (containerd, CRI-O, Docker and Podman, with
	// systemd or cgroupfs cgroups). Such a holder's series is reported
	// under a resource of its own carrying container.id.
	ContainerID bool `mapstructure:"container_id"`
	// K8sPodUID adds k8s_pod_uid: the Kubernetes pod the process runs in.
	// Such a holder's series is reported under a resource of its own
	// carrying k8s.pod.uid, which the k8sattributes processor associates
	// with the pod's name, namespace and container names.
	K8sPodUID bool `mapstructure:"k8s_pod_uid"`
}

// NoQueuedJob is the queued_job label of a process read and found to belong
// to no queued job.
const NoQueuedJob = "none"

// scanOptions are the procscan reads the labels need; cgroupRoot is the
// cgroupfs mount where a Slurm job's directory is checked to be slurmd's.
func (c AttributionConfig) scanOptions(cgroupRoot string) procscan.AttributionOptions {
	return procscan.AttributionOptions{
		User:        c.User,
		QueuedJob:   c.QueuedJob,
		QueuedAgent: c.QueuedAgent,
		Cgroup:      c.SlurmJob || c.ContainerID || c.K8sPodUID,
		CgroupRoot:  cgroupRoot,
	}
}

// labels turns a holder's attribution into the tt_process label options
// switched on, in a fixed order. It runs once per series.
func (c AttributionConfig) labels(a procscan.Attribution) []metadata.MetricAttributeOption {
	var opts []metadata.MetricAttributeOption
	if c.User {
		opts = append(opts, metadata.WithUserMetricAttribute(a.User))
	}
	if c.QueuedJob {
		job := a.QueuedJob
		if job == "" {
			job = NoQueuedJob
		}
		opts = append(opts, metadata.WithQueuedJobMetricAttribute(job))
	}
	if c.QueuedAgent {
		opts = append(opts, metadata.WithQueuedAgentMetricAttribute(a.QueuedAgent))
	}
	if c.SlurmJob {
		opts = append(opts, metadata.WithSlurmJobMetricAttribute(a.SlurmJob))
	}
	if c.ContainerID {
		opts = append(opts, metadata.WithContainerIDMetricAttribute(a.ContainerID))
	}
	if c.K8sPodUID {
		opts = append(opts, metadata.WithK8sPodUIDMetricAttribute(a.PodUID))
	}
	return opts
}

// holderResource tells whether a holder's series goes out under a resource
// of its own, and with which pod and container: it does when the holder is
// known to run in a pod or container and that label is on. The
// k8sattributes processor associates a resource, not a point, with a pod.
func (c AttributionConfig) holderResource(a procscan.Attribution) (pod, container string, own bool) {
	if c.K8sPodUID && known(a.PodUID) {
		pod = a.PodUID
	}
	if c.ContainerID && known(a.ContainerID) {
		container = a.ContainerID
	}
	return pod, container, pod != "" || container != ""
}

// known reports a label value that names something.
func known(v string) bool { return v != "" && v != procscan.Unknown }

// emitHolder moves the points recorded so far, one holder's, into a
// resource of their own: the host's, plus its pod and container.
func (s *ttScraper) emitHolder(cur *series) {
	rb := s.mb.NewResourceBuilder()
	rb.SetHostName(s.hostname)
	if cur.pod != "" {
		rb.SetK8sPodUID(cur.pod)
	}
	if cur.container != "" {
		rb.SetContainerID(cur.container)
	}
	s.mb.EmitForResource(metadata.WithResource(rb.Emit()))
}

// recordProcess records one tt_process point of cur.
func (s *ttScraper) recordProcess(now pcommon.Timestamp, val int64, cur *series) {
	s.mb.RecordTtProcessDataPoint(now, val, s.hostname, cur.pidLabel, cur.friendlyName, cur.commandLine, cur.labels...)
}
