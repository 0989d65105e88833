package runner

import (
	"bytes"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Audit sessions: where no cgroup holds a job, the runner finds what it
// left behind by the audit session the exec helper gives it (see
// execjob.Request.AuditSession): a kernel-assigned id every descendant
// inherits and no unprivileged process can change, unlike its marker (an
// environment variable), its session and process group (setsid) or its
// parent (a double fork).

// auditUnset is the session id of a process no login gave one
// (AUDIT_SID_UNSET).
const auditUnset = 1<<32 - 1

// auditSessionOf reads /proc/<pid>/sessionid under procRoot through buf;
// ok is false when it cannot be read (no audit support, or the process is
// gone).
func auditSessionOf(procRoot, pid string, buf []byte) (id uint32, ok bool) {
	fd, err := unix.Open(procRoot+"/"+pid+"/sessionid", unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return 0, false
	}
	n, err := unix.Read(fd, buf)
	unix.Close(fd)
	if err != nil || n <= 0 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(bytes.TrimSpace(buf[:n])), 10, 32)
	return uint32(v), err == nil
}

// jobAuditSession is the audit session of the job whose leader is pid
// (alive or an unreaped zombie, so the pid is still its own), or 0 when
// it has none of its own: the helper could not give it one, so it shares
// queued's (or no session at all), and a sweep by it would take others.
func jobAuditSession(procRoot string, pid int) uint32 {
	buf := make([]byte, 16)
	id, ok := auditSessionOf(procRoot, strconv.Itoa(pid), buf)
	if !ok || id == auditUnset || id == 0 {
		return 0
	}
	if own, ok := ownAuditSession(); ok && own == id {
		return 0
	}
	return id
}

// ownAuditSession is queued's own audit session, read once: queued never
// writes its own loginuid (the helper does, for the program), so it does
// not change.
var ownAuditSession = sync.OnceValues(func() (uint32, bool) {
	return auditSessionOf("/proc", "self", make([]byte, 16))
})

// AuditSessions reports whether jobs this process starts can get an audit
// session of their own, and if not, why: the kernel must have audit
// support, and this process's loginuid must be unset (a service's) or it
// must hold CAP_AUDIT_CONTROL. Where it cannot, and no cgroup is
// delegated, a job's process that left its session and dropped its marker
// outlives the job.
func AuditSessions() (bool, string) {
	b, err := os.ReadFile("/proc/self/loginuid")
	if err != nil {
		return false, "the kernel has no audit support (no /proc/self/loginuid)"
	}
	if string(bytes.TrimSpace(b)) == strconv.FormatUint(auditUnset, 10) {
		return true, "queued's loginuid is unset: each job gets an audit session of its own"
	}
	var hdr = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err == nil && data[unix.CAP_AUDIT_CONTROL/32].Effective&(1<<(unix.CAP_AUDIT_CONTROL%32)) != 0 {
		return true, "queued holds CAP_AUDIT_CONTROL: each job gets an audit session of its own (unless loginuids were made immutable)"
	}
	return false, "queued's loginuid is set (a login session's) and it lacks CAP_AUDIT_CONTROL: jobs share queued's audit session"
}

// auditSessions is AuditSessions' verdict alone.
func auditSessions() bool { ok, _ := AuditSessions(); return ok }
