package procscan

import (
	"bytes"
	"errors"
	"os/user"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ttkit/ttkit/internal/procthread"
)

// JobEnvVar is the variable queued puts in the environment of every job
// process, holding the job's id (queued/runner.JobEnvVar). A process a job
// starts inherits it, even one that left the job's process group. It is
// repeated here rather than imported, so that the collector does not link
// queued's packages.
const JobEnvVar = "TT_QUEUE_JOB_ID"

// AgentEnvVar is the variable queued puts in the environment of a job an
// AI agent queued through tt-device-queue mcp, holding the agent's name
// (queued/api.AgentEnvVar), so a holder can be told to be an agent's work.
const AgentEnvVar = "TT_QUEUE_AGENT"

// maxAgentBytes bounds the agent's name, as queued bounds it
// (queued/api.MaxAgentBytes).
const maxAgentBytes = 64

const (
	// maxEnvironRead bounds /proc/<pid>/environ: the kernel's bound on
	// the argument vector and environment together, as for cmdline.
	// queued appends its marker after the caller's environment, so the
	// whole of it may have to be read.
	maxEnvironRead = maxCmdlineRead
	// maxCgroupRead bounds /proc/<pid>/cgroup: one line per cgroup v1
	// hierarchy, each a path of at most PATH_MAX.
	maxCgroupRead = 64 << 10
)

// AttributionOptions switches on the reads that say whose a holder is.
// Each costs one more procfs read per newly seen holder, none per scan.
type AttributionOptions struct {
	// User reads the owner of /proc/<pid> (the process's effective UID)
	// and names it from the user database: Attribution.User.
	User bool
	// QueuedJob looks for JobEnvVar in /proc/<pid>/environ:
	// Attribution.QueuedJob. The environment of another user's process
	// can only be read with CAP_SYS_PTRACE (root has it).
	QueuedJob bool
	// QueuedAgent looks for AgentEnvVar in /proc/<pid>/environ (the same
	// read as QueuedJob's): Attribution.QueuedAgent.
	QueuedAgent bool
	// Cgroup reads /proc/<pid>/cgroup for a Slurm job, a container and a
	// Kubernetes pod: Attribution.SlurmJob, ContainerID and PodUID.
	Cgroup bool
	// CgroupRoot is where the cgroup filesystem is mounted (cgroup v1
	// hierarchies in directories named for their controllers below it),
	// for checking that a Slurm job's cgroup directory is slurmd's.
	// Default DefaultCgroupRoot.
	CgroupRoot string
}

// DefaultCgroupRoot is where the cgroup filesystem is mounted.
const DefaultCgroupRoot = "/sys/fs/cgroup"

// Any reports whether any attribution read is on.
func (o AttributionOptions) Any() bool { return o.User || o.QueuedJob || o.QueuedAgent || o.Cgroup }

// Attribution says whose a holder is, read once with its Identity. A field
// whose read is switched off is empty; one whose source could not be read
// (the process exited, or its environment is another user's) is Unknown; one
// read and not found (no job marker, no container) is empty.
type Attribution struct {
	// User is the name of the user owning /proc/<pid>, or the decimal UID
	// when the user database has no entry for it (as in a container that
	// does not share the host's /etc/passwd).
	User string
	// QueuedJob is the 32-hex-digit id of the queued job the process
	// belongs to, from JobEnvVar in its environment.
	QueuedJob string
	// QueuedAgent is the AI agent that queued the process's job, from
	// AgentEnvVar in its environment (printable ASCII, at most 64 bytes);
	// empty for a person's job or no job.
	QueuedAgent string
	// SlurmJob is the Slurm job id from a .../job_<id>/... cgroup path.
	SlurmJob string
	// ContainerID is the 64-hex-digit id of the container (containerd,
	// CRI-O, Docker or Podman) whose cgroup the process is in.
	ContainerID string
	// PodUID is the UID of the Kubernetes pod whose cgroup the process is
	// in, with dashes (as the API server writes it), whether the kubelet
	// uses the systemd or the cgroupfs driver.
	PodUID string
}

// unknownAttribution is the attribution of a process that could not be read:
// Unknown in every field whose read is on.
func unknownAttribution(o AttributionOptions) Attribution {
	var a Attribution
	if o.User {
		a.User = Unknown
	}
	if o.QueuedJob {
		a.QueuedJob = Unknown
	}
	if o.QueuedAgent {
		a.QueuedAgent = Unknown
	}
	if o.Cgroup {
		a.SlurmJob, a.ContainerID, a.PodUID = Unknown, Unknown, Unknown
	}
	return a
}

// readAttribution reads the attribution of the process whose procfs
// directory is dir, as far as o asks.
func (r *reader) readAttribution(dir string, o AttributionOptions) Attribution {
	var a Attribution
	if o.User {
		a.User = Unknown
		var st unix.Stat_t
		if err := unix.Stat(dir, &st); err == nil {
			a.User = userName(st.Uid)
		}
	}
	if o.QueuedJob || o.QueuedAgent {
		data, err := readFile(dir+"/environ", &r.buf, maxEnvironRead)
		if errors.Is(err, unix.ESRCH) {
			// Its main thread exited; another runs on (see procthread).
			procthread.Other(dir, func(td string) bool {
				data, err = readFile(td+"/environ", &r.buf, maxEnvironRead)
				return err == nil
			})
		}
		if o.QueuedJob {
			a.QueuedJob = Unknown
			if err == nil {
				a.QueuedJob = jobFromEnviron(data)
			}
		}
		if o.QueuedAgent {
			a.QueuedAgent = Unknown
			if err == nil {
				a.QueuedAgent = agentFromEnviron(data)
			}
		}
	}
	if o.Cgroup {
		a.SlurmJob, a.ContainerID, a.PodUID = Unknown, Unknown, Unknown
		if data, err := readFile(dir+"/cgroup", &r.buf, maxCgroupRead); err == nil {
			_, a.ContainerID, a.PodUID = ParseCgroup(data)
			a.SlurmJob = slurmdsJob(data, o.CgroupRoot)
		}
	}
	return a
}

// userName names uid from the user database, or renders it in decimal
// when there is no entry (or no database) for it. It is looked up afresh
// for every new holder: a UID given to another user must not keep the
// first user's name.
func userName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	u, err := user.LookupId(id)
	if err != nil || u.Username == "" {
		return id
	}
	if name := Sanitize([]byte(u.Username)); name != "" {
		return name
	}
	return id
}

// jobFromEnviron returns the job id of the first JobEnvVar entry of a
// NUL-separated environment (the one getenv would return), or "" when there
// is none or its value is not a queued job id (32 lowercase hex digits).
func jobFromEnviron(environ []byte) string {
	if v, ok := envValue(environ, JobEnvVar); ok && isHex(v, 32) {
		return string(v)
	}
	return ""
}

// agentFromEnviron returns the value of the first AgentEnvVar entry of a
// NUL-separated environment, as Sanitize renders text (printable ASCII),
// cut to maxAgentBytes, or "" when there is none.
func agentFromEnviron(environ []byte) string {
	v, ok := envValue(environ, AgentEnvVar)
	if !ok {
		return ""
	}
	clean := make([]byte, 0, len(v))
	for _, c := range v {
		if c >= 0x20 && c <= 0x7e {
			clean = append(clean, c)
		}
	}
	return string(clean[:min(len(clean), maxAgentBytes)])
}

// envValue returns the value of the first name entry of a NUL-separated
// environment (the one getenv would return).
func envValue(environ []byte, name string) ([]byte, bool) {
	prefix := []byte(name + "=")
	for len(environ) > 0 {
		entry := environ
		if i := bytes.IndexByte(environ, 0); i >= 0 {
			entry, environ = environ[:i], environ[i+1:]
		} else {
			environ = nil
		}
		if v, ok := bytes.CutPrefix(entry, prefix); ok {
			return v, true
		}
	}
	return nil, false
}

// isHex reports whether b is exactly n lowercase hexadecimal digits.
func isHex(b []byte, n int) bool {
	if len(b) != n {
		return false
	}
	for _, c := range b {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// containerScopes are the prefixes container runtimes give a container's
// cgroup: <prefix><64 hex>.scope under systemd, and <prefix><64 hex> under
// cgroupfs for CRI-O and Podman (containerd and Docker use the bare id
// there). CRI-O's crio-conmon-<id> holds the container's monitor, not the
// container, and matches none of them.
var containerScopes = []string{"cri-containerd-", "crio-", "docker-", "libpod-"}

// ParseCgroup finds, in the contents of a /proc/<pid>/cgroup file, the
// Slurm job, the container and the Kubernetes pod the process belongs to,
// each "" when its path names none. Every line (cgroup v2's single 0::
// line, or one per v1 hierarchy) is searched, and the first match of each
// wins. It knows these layouts:
//
//   - Kubernetes pods with the kubelet's systemd driver:
//     .../kubepods-<qos>-pod<uid with _ for ->.slice/<runtime scope>;
//     with its cgroupfs driver: /kubepods/<qos>/pod<uid>/<container id>
//     (<qos>- and <qos>/ are absent for a Guaranteed pod);
//   - containers: a systemd scope cri-containerd-<id>.scope (containerd),
//     crio-<id>.scope (CRI-O), docker-<id>.scope (Docker), libpod-<id>.scope
//     (Podman); under cgroupfs the same name without .scope (CRI-O's
//     /kubepods/.../crio-<id>, Podman's /libpod_parent/libpod-<id>) or the
//     64-hex-digit id itself (/docker/<id>, containerd's
//     /kubepods/.../<id>); or a <slice>:<runtime>:<id> element;
//   - Slurm: v1's /slurm/uid_<uid>/job_<id>/..., v2's
//     /system.slice/[<node>_]slurmstepd.scope/job_<id>/... (slurmd's
//     own cgroup roots), never a path through a user's delegated
//     user@<uid>.service, where the user may create any directory.
//     That the job directory is slurmd's (root's) is checked by the
//     scanner, not here: see slurmdsJob.
func ParseCgroup(data []byte) (slurmJob, containerID, podUID string) {
	for _, line := range strings.Split(string(data), "\n") {
		// hierarchy-ID:controller-list:path; the path may itself hold ':'.
		_, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		_, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if slurmJob == "" {
			slurmJob, _ = slurmJobDir(path)
		}
		for _, elem := range strings.Split(path, "/") {
			if podUID == "" {
				podUID = podOf(elem)
			}
			if containerID == "" {
				containerID = containerOf(elem)
			}
		}
	}
	return slurmJob, containerID, podUID
}

// podOf returns the pod UID a cgroup path element names, or "".
func podOf(elem string) string {
	if i := strings.IndexByte(elem, ':'); i >= 0 {
		elem = elem[:i] // <slice>:<runtime>:<id>
	}
	var uid string
	switch {
	case strings.HasPrefix(elem, "kubepods") && strings.HasSuffix(elem, ".slice"):
		// systemd driver: kubepods-besteffort-pod<uid>.slice, with the
		// UID's dashes written as underscores (a dash nests slices).
		i := strings.LastIndex(elem, "-pod")
		if i < 0 {
			return ""
		}
		uid = strings.ReplaceAll(strings.TrimSuffix(elem[i+len("-pod"):], ".slice"), "_", "-")
	case strings.HasPrefix(elem, "pod"):
		// cgroupfs driver: /kubepods/besteffort/pod<uid>/...
		uid = elem[len("pod"):]
	default:
		return ""
	}
	if !isUID(uid) {
		return ""
	}
	return uid
}

// isUID reports whether s is a UUID as Kubernetes writes UIDs: 8-4-4-4-12
// lowercase hex digits.
func isUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// containerOf returns the container ID a cgroup path element names, or "".
func containerOf(elem string) string {
	id, scope := strings.CutSuffix(elem, ".scope")
	if i := strings.LastIndexByte(id, ':'); i >= 0 && !scope {
		id = id[i+1:] // <slice>:cri-containerd:<id>
	} else {
		prefixed := false
		for _, p := range containerScopes {
			if rest, ok := strings.CutPrefix(id, p); ok {
				id, prefixed = rest, true
				break
			}
		}
		if scope && !prefixed {
			return "" // a scope no container runtime names
		}
	}
	if !isHex([]byte(id), 64) {
		return ""
	}
	return id
}

// isDecimal reports whether s is a non-empty run of ASCII digits of a
// sensible length for an id.
func isDecimal(s string) bool {
	if len(s) == 0 || len(s) > 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// slurmJobDir returns the Slurm job a cgroup path lies in and the path of
// that job's directory, when the path has one of slurmd's layouts:
// /slurm[_<node>]/uid_<uid>/job_<id> (cgroup v1; the node's name is there
// when Slurm is built for several slurmds a host, as Debian's is) or
// /system.slice/[<node>_]slurmstepd.scope/job_<id> (cgroup v2); else "".
func slurmJobDir(path string) (id, dir string) {
	elems := strings.Split(path, "/")
	for _, e := range elems {
		if strings.HasPrefix(e, "user@") {
			return "", "" // a user's delegated subtree: anything can be made there
		}
	}
	var n int
	switch {
	case len(elems) >= 4 && elems[0] == "" && slurmV1Root(elems[1]) && strings.HasPrefix(elems[2], "uid_") && isDecimal(elems[2][len("uid_"):]):
		n = 3
	case len(elems) >= 4 && elems[0] == "" && elems[1] == "system.slice" && strings.HasSuffix(elems[2], "slurmstepd.scope"):
		n = 3
	default:
		return "", ""
	}
	id, ok := strings.CutPrefix(elems[n], "job_")
	if !ok || !isDecimal(id) {
		return "", ""
	}
	return id, strings.Join(elems[:n+1], "/")
}

// slurmV1Root reports whether a cgroup v1 path's first element is slurmd's:
// "slurm", or "slurm_<node>".
func slurmV1Root(e string) bool {
	node, ok := strings.CutPrefix(e, "slurm_")
	return e == "slurm" || ok && node != ""
}

// slurmdsJob returns the Slurm job of a /proc/<pid>/cgroup text when its
// job directory, under the cgroupfs mount root, is root's as slurmd makes
// it; "" when no line names one in slurmd's layout, or that directory is
// another user's (who could have made it, or been given it, to pass a
// process off as a job's); Unknown when the directory cannot be looked at
// (no cgroupfs mounted where the collector runs).
func slurmdsJob(data []byte, root string) string {
	if root == "" {
		root = DefaultCgroupRoot
	}
	unknown := false
	for _, line := range strings.Split(string(data), "\n") {
		hier, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		controllers, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		id, dir := slurmJobDir(path)
		if id == "" {
			continue
		}
		mount := root
		if hier != "0" || controllers != "" {
			// A v1 hierarchy is mounted in a directory named for its
			// controllers (name=systemd's is "systemd").
			name := strings.TrimPrefix(controllers, "name=")
			if name == "" || strings.Contains(name, "/") || name == "." || name == ".." {
				continue
			}
			mount = root + "/" + name
		}
		var st unix.Stat_t
		if err := unix.Lstat(mount+dir, &st); err != nil {
			unknown = true
			continue
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Uid == 0 {
			return id
		}
	}
	if unknown {
		return Unknown
	}
	return ""
}
