// queued-exec's start before the Go runtime: the steps of package
// execjob's execJob, taken in a constructor, so a job's start costs no Go
// runtime (see start_cgo.go for why, and execjob for the protocol and
// for what each step is for). Package execjob is the reference: the same
// request on descriptor 3, the same status lines on descriptor 4, the
// same steps in the same order, the same exit status; its tests
// (helpers_test.go) run both builds of queued-exec side by side and hold
// this file to the Go one, as root with a real user to become as well.
//
// It runs before main, on the process's only thread: nothing else runs
// yet, so the switch to the user's credentials is the whole process's.
// Everything it takes from the request is bounded by the request's
// length, itself bounded before anything is allocated.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

// As in package execjob (wire.go, execjob.go).
#define QX_MAGIC "qx2\0"
#define QX_MAX_REQUEST (16u << 20)
#define QX_GO 'g'
#define QX_FAIL_CODE 127
#define QX_FLAG_CRED 1
#define QX_FLAG_KEYRING 2
#define QX_FLAG_AUDIT 4
#define QX_FLAG_OOM 8
#define QX_FLAG_CPUS 16
#define QX_MAX_CPU_BYTES 128
#define QX_CANCELLED "the start was called off before the program ran"
#define QX_NAME "queued-exec"

#define REQ_FD 3
#define STATUS_FD 4

// As in package runner (spawner.go).
#define QX_SPAWNER_FD 3
#define QX_SPAWNER_NAME "queued-spawn"
#define QX_SPAWNER_HELLO "qxs1"

#define KEYCTL_JOIN_SESSION_KEYRING_ 1
#define CLOSE_RANGE_CLOEXEC_ 4

// qx_write writes all of b to fd, and gives up at an error: a status
// queued no longer reads changes nothing of what the helper does.
static void qx_write(int fd, const char *b, size_t n) {
	while (n > 0) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		b += w;
		n -= (size_t)w;
	}
}

static void qx_report(const char *stage) {
	char line[32];
	int n = snprintf(line, sizeof line, "%s\n", stage);
	qx_write(STATUS_FD, line, (size_t)n);
}

// qx_fail_errno reports stage's failure with a system error and ends the
// helper, as execJob's fail does for an error that is an Errno.
static void qx_fail_errno(const char *stage, int e) __attribute__((noreturn));
static void qx_fail_errno(const char *stage, int e) {
	char line[64];
	int n = snprintf(line, sizeof line, "%s\terrno\t%d\n", stage, e);
	qx_write(STATUS_FD, line, (size_t)n);
	_exit(QX_FAIL_CODE);
}

// qx_fail_msg reports stage's failure with a message (tabs and line ends
// made spaces, as Status.Line does) and ends the helper.
static void qx_fail_msg(const char *stage, const char *format, ...) __attribute__((noreturn, format(printf, 2, 3)));
static void qx_fail_msg(const char *stage, const char *format, ...) {
	char msg[256], line[320];
	va_list ap;
	va_start(ap, format);
	vsnprintf(msg, sizeof msg, format, ap);
	va_end(ap);
	for (char *p = msg; *p; p++)
		if (*p == '\t' || *p == '\n' || *p == '\r')
			*p = ' ';
	int n = snprintf(line, sizeof line, "%s\tmsg\t%s\n", stage, msg);
	if (n >= (int)sizeof line)
		n = sizeof line - 1;
	qx_write(STATUS_FD, line, (size_t)n);
	_exit(QX_FAIL_CODE);
}

// qx_read_full reads n bytes of fd into p: 0 when it has them, 1 at the
// end of the descriptor (*got says how many came), -1 with errno set at
// an error. A descriptor left non-blocking is waited on, not spun on.
static int qx_read_full(int fd, void *p, size_t n, size_t *got) {
	size_t off = 0;
	while (off < n) {
		ssize_t r = read(fd, (char *)p + off, n - off);
		if (r > 0) {
			off += (size_t)r;
			continue;
		}
		if (r == 0) {
			*got = off;
			return 1;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			struct pollfd pfd = {.fd = fd, .events = POLLIN};
			poll(&pfd, 1, -1);
			continue;
		}
		return -1;
	}
	*got = off;
	return 0;
}

// qx_read_or_fail reads n bytes of the request or ends the helper with
// io.ReadFull's reasons: EOF when nothing came, unexpected EOF when part.
static void qx_read_or_fail(void *p, size_t n) {
	size_t got = 0;
	int r = qx_read_full(REQ_FD, p, n, &got);
	if (r < 0)
		qx_fail_errno("setup", errno);
	if (r > 0)
		qx_fail_msg("setup", "reading the request: %s", got == 0 ? "EOF" : "unexpected EOF");
}

// A reader of the request's body, as wireReader: the first field that
// does not fit sets why, and every later field reads empty.
struct qx_reader {
	const unsigned char *b;
	size_t left;
	char why[128];
};

static const unsigned char *qx_take(struct qx_reader *d, size_t n) {
	if (d->why[0])
		return NULL;
	if (n > d->left) {
		snprintf(d->why, sizeof d->why, "a field of %zu bytes where %zu are left", n, d->left);
		return NULL;
	}
	const unsigned char *v = d->b;
	d->b += n;
	d->left -= n;
	return v;
}

static uint32_t qx_u32(struct qx_reader *d) {
	const unsigned char *b = qx_take(d, 4);
	if (!b)
		return 0;
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

// qx_count is a list's length, checked against the bytes left at least
// min bytes an element, so a forged count allocates nothing.
static size_t qx_count(struct qx_reader *d, size_t min) {
	uint32_t n = qx_u32(d);
	if (!d->why[0] && n > d->left / min)
		snprintf(d->why, sizeof d->why, "a list of %u where %zu bytes are left", n, d->left);
	return d->why[0] ? 0 : n;
}

// A string of the request: its bytes, NUL-terminated, and whether it
// holds a NUL of its own (which the kernel would cut it at: Go's
// syscalls refuse such a string with EINVAL, and so does this helper, at
// the step that uses it).
struct qx_str {
	char *s;
	size_t len;
	int nul;
};

static struct qx_str qx_string(struct qx_reader *d) {
	struct qx_str v = {"", 0, 0};
	uint32_t n = qx_u32(d);
	const unsigned char *b = qx_take(d, n);
	if (!b)
		return v;
	v.s = malloc((size_t)n + 1);
	if (!v.s)
		qx_fail_errno("setup", ENOMEM);
	memcpy(v.s, b, n);
	v.s[n] = 0;
	v.len = n;
	v.nul = memchr(b, 0, n) != NULL;
	return v;
}

// qx_strings reads a list into a NULL-terminated array; *nul is set when
// one of them holds a NUL.
static char **qx_strings(struct qx_reader *d, size_t *count, int *nul) {
	size_t n = qx_count(d, 4);
	char **list = calloc(n + 1, sizeof *list);
	if (!list)
		qx_fail_errno("setup", ENOMEM);
	for (size_t i = 0; i < n; i++) {
		struct qx_str s = qx_string(d);
		list[i] = s.s;
		*nul |= s.nul;
	}
	*count = n;
	return list;
}

// qx_write_file writes s to the file at path, best effort, as execJob's
// os.WriteFile calls whose errors it ignores.
static void qx_write_file(const char *path, const char *s) {
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	qx_write(fd, s, strlen(s));
	close(fd);
}

// qx_default_signals gives every signal queued's child inherited ignored
// its default disposition (execjob's defaultSignals), with the kernel's
// own call, as libc's refuses the signals it keeps for itself.
static void qx_default_signals(void) {
	struct {
		uint64_t handler, flags, restorer, mask;
	} act, dfl = {0};
	for (long sig = 1; sig <= 64; sig++) {
		if (syscall(SYS_rt_sigaction, sig, NULL, &act, 8) == 0 && act.handler == (uint64_t)(uintptr_t)SIG_IGN)
			syscall(SYS_rt_sigaction, sig, &dfl, NULL, 8);
	}
}

static void qx_helper(void) __attribute__((noreturn));
static void qx_spawner(void) __attribute__((noreturn));

// qx_is_spawner says whether queued started this process as its spawner
// (spawner.go): descriptor 3 is then a socket of packets; a helper's is
// its request pipe.
static int qx_is_spawner(void) {
	int type = 0;
	socklen_t len = sizeof type;
	return getsockopt(QX_SPAWNER_FD, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_SEQPACKET;
}

__attribute__((constructor)) static void qx_start(void) {
	if (qx_is_spawner())
		qx_spawner();
	// Run by hand, without queued's descriptors: Go's main refuses.
	if (fcntl(STATUS_FD, F_GETFD) < 0)
		return;
	qx_helper();
}

// qx_spare is a process just forked by the spawner, given its request,
// status and output descriptors: it puts them where a helper started by
// queued has them (request 3, status 4, output 1 and 2), closes every
// other one (the spawner's socket first), leaves the spawner's session
// for a session of its own, as a spare started by queued does (Setsid),
// and goes on as that helper.
static void qx_spare(int req, int status, int out) __attribute__((noreturn));
static void qx_spare(int req, int status, int out) {
	// Above every number they are moved to, so no dup2 below overwrites
	// a descriptor still to be moved.
	int r = fcntl(req, F_DUPFD, 16), st = fcntl(status, F_DUPFD, 16), o = fcntl(out, F_DUPFD, 16);
	if (r < 0 || st < 0 || o < 0 || dup2(r, REQ_FD) < 0 || dup2(st, STATUS_FD) < 0 || dup2(o, 1) < 0 || dup2(o, 2) < 0)
		_exit(QX_FAIL_CODE);
	if (syscall(SYS_close_range, STATUS_FD + 1, ~0u, 0) != 0)
		_exit(QX_FAIL_CODE);
	if (setsid() < 0)
		_exit(QX_FAIL_CODE);
	qx_helper();
}

// qx_spawner makes spare helpers for queued by forking itself (issue
// 41): a spare started by queued is a fork of queued and the execve of
// this static binary, about 1.5 ms of CPU and 33 page faults of a
// helper's start on our machines beside the job it precedes; a fork of
// this small process costs a fraction. Each message from queued carries
// a spare's three descriptors (request, status, output) and is answered
// with the new process's PID (as 4 bytes, a negative errno when the fork
// failed). The fork is made with CLONE_PARENT, so every spare is queued's
// child, as one it started is: queued waits for it, keeps it a zombie
// and reaps it as its own. The spawner reads nothing else; it ends when
// queued closes the socket, or dies.
static void qx_spawner(void) {
	signal(SIGPIPE, SIG_IGN);
	qx_write_file("/proc/self/comm", QX_SPAWNER_NAME);
	if (write(QX_SPAWNER_FD, QX_SPAWNER_HELLO, 4) != 4)
		_exit(QX_FAIL_CODE);
	for (;;) {
		char byte;
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(3 * sizeof(int))];
		} control;
		struct iovec iov = {.iov_base = &byte, .iov_len = 1};
		struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.b, .msg_controllen = sizeof control.b};
		ssize_t n = recvmsg(QX_SPAWNER_FD, &msg, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0);
		int fds[3], nfds = 0;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			int *got = (int *)CMSG_DATA(c);
			for (size_t i = 0; i < k; i++) {
				if (nfds < 3)
					fds[nfds++] = got[i];
				else
					close(got[i]);
			}
		}
		int32_t reply = -EINVAL;
		if (nfds == 3 && !(msg.msg_flags & MSG_CTRUNC)) {
			long pid = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0);
			if (pid == 0)
				qx_spare(fds[0], fds[1], fds[2]);
			reply = pid > 0 ? (int32_t)pid : -errno;
		}
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		if (write(QX_SPAWNER_FD, &reply, sizeof reply) != (ssize_t)sizeof reply)
			_exit(0);
	}
}

// qx_helper takes the steps of a helper whose request is on descriptor 3
// and status pipe on 4: it executes the program or ends.
static void qx_helper(void) {
	// A write to a status pipe queued closed must fail, not end the
	// helper: execJob's writes do (Go ignores SIGPIPE but on 1 and 2).
	// Every signal ignored here or before is made default again before
	// the execve.
	signal(SIGPIPE, SIG_IGN);
	qx_write_file("/proc/self/comm", QX_NAME);
	qx_report("setup");

	unsigned char head[8];
	qx_read_or_fail(head, sizeof head);
	if (memcmp(head, QX_MAGIC, 4) != 0)
		qx_fail_msg("setup", "the request begins %02x%02x%02x%02x, not \"qx2\\x00\": queued and its exec helper are of different versions",
			    head[0], head[1], head[2], head[3]);
	uint32_t n = (uint32_t)head[4] | (uint32_t)head[5] << 8 | (uint32_t)head[6] << 16 | (uint32_t)head[7] << 24;
	if (n > QX_MAX_REQUEST)
		qx_fail_msg("setup", "request of %u bytes, over %u", n, QX_MAX_REQUEST);
	unsigned char *body = malloc(n ? n : 1);
	if (!body)
		qx_fail_errno("setup", ENOMEM);
	qx_read_or_fail(body, n);

	struct qx_reader d = {.b = body, .left = n};
	int execNUL = 0;
	size_t argc = 0, envc = 0, ngroups = 0;
	struct qx_str path = qx_string(&d);
	execNUL |= path.nul;
	char **argv = qx_strings(&d, &argc, &execNUL);
	char **env = qx_strings(&d, &envc, &execNUL);
	struct qx_str dir = qx_string(&d);
	const unsigned char *fb = qx_take(&d, 1);
	unsigned flags = fb ? *fb : 0;
	mode_t umask_ = (mode_t)qx_u32(&d);
	uid_t uid = 0;
	gid_t gid = 0, *groups = NULL;
	if (flags & QX_FLAG_CRED) {
		uid = qx_u32(&d);
		gid = qx_u32(&d);
		ngroups = qx_count(&d, 4);
		groups = calloc(ngroups ? ngroups : 1, sizeof *groups);
		if (!groups)
			qx_fail_errno("setup", ENOMEM);
		for (size_t i = 0; i < ngroups; i++)
			groups[i] = qx_u32(&d);
	}
	int32_t oom = 0;
	if (flags & QX_FLAG_OOM)
		oom = (int32_t)qx_u32(&d);
	struct qx_str cpus = {"", 0, 0};
	if (flags & QX_FLAG_CPUS) {
		cpus = qx_string(&d);
		if (!d.why[0] && cpus.len > QX_MAX_CPU_BYTES)
			qx_fail_msg("setup", "decoding the request: a set of %zu CPUs, over the %u a helper holds",
				    cpus.len * 8, QX_MAX_CPU_BYTES * 8);
	}
	if (d.why[0])
		qx_fail_msg("setup", "decoding the request: %s", d.why);
	if (d.left != 0)
		qx_fail_msg("setup", "decoding the request: %zu bytes past its end", d.left);
	if (path.len == 0 || argc == 0 || dir.len == 0)
		qx_fail_msg("setup", "request without a program or a working directory");

	// Nothing queued inherited reaches the program: every descriptor
	// above the request, the status pipe too, closes at the execve.
	if (syscall(SYS_close_range, STATUS_FD, ~0u, CLOSE_RANGE_CLOEXEC_) != 0)
		qx_fail_errno("setup", errno);
	if (flags & QX_FLAG_CPUS) {
		// The CPUs queued started with, which a queued kept to one CPU
		// hands on (package cpupin): CPU n is bit n%8 of byte n/8.
		cpu_set_t set;
		CPU_ZERO(&set);
		for (size_t i = 0; i < cpus.len * 8; i++)
			if ((unsigned char)cpus.s[i / 8] & (1u << (i % 8)))
				CPU_SET(i, &set);
		if (sched_setaffinity(0, sizeof set, &set) != 0)
			qx_fail_errno("setup", errno);
	}
	char num[16];
	if (flags & QX_FLAG_OOM) {
		snprintf(num, sizeof num, "%d", oom);
		qx_write_file("/proc/self/oom_score_adj", num);
	}
	umask(umask_ & 07777);
	if (flags & QX_FLAG_AUDIT) {
		snprintf(num, sizeof num, "%u", (flags & QX_FLAG_CRED) ? uid : geteuid());
		qx_write_file("/proc/thread-self/loginuid", num);
	}
	if (flags & QX_FLAG_CRED) {
		// Groups, then gid, then uid; then the ids are checked, and
		// root must not be had back.
		if (syscall(SYS_setgroups, ngroups, groups) != 0)
			qx_fail_errno("setup", errno);
		if (syscall(SYS_setresgid, gid, gid, gid) != 0)
			qx_fail_errno("setup", errno);
		if (syscall(SYS_setresuid, uid, uid, uid) != 0)
			qx_fail_errno("setup", errno);
		// An id of all ones is -1 to the kernel, "leave it as it is":
		// the ids the process has now must be the request's.
		uid_t ur = 0, ue = 0, us = 0;
		gid_t gr = 0, ge = 0, gs = 0;
		if (getresgid(&gr, &ge, &gs) != 0 || gr != gid || ge != gid || gs != gid)
			qx_fail_msg("setup", "gid %u was not taken: the process has %u, %u, %u", gid, gr, ge, gs);
		if (getresuid(&ur, &ue, &us) != 0 || ur != uid || ue != uid || us != uid)
			qx_fail_msg("setup", "uid %u was not taken: the process has %u, %u, %u", uid, ur, ue, us);
		if (uid != 0 && syscall(SYS_setuid, 0) == 0)
			qx_fail_msg("setup", "uid %u could switch back to root", uid);
	}
	if ((flags & QX_FLAG_KEYRING) && syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING_, NULL) < 0)
		qx_fail_errno("setup", errno);

	qx_report("chdir");
	if (dir.nul)
		qx_fail_errno("chdir", EINVAL);
	if (chdir(dir.s) != 0)
		qx_fail_errno("chdir", errno);

	qx_report("ready");
	unsigned char go = 0;
	size_t got = 0;
	if (qx_read_full(REQ_FD, &go, 1, &got) != 0 || go != QX_GO)
		qx_fail_msg("ready", QX_CANCELLED);
	close(REQ_FD);
	qx_report("exec");
	qx_default_signals();
	if (execNUL)
		errno = EINVAL;
	else
		execve(path.s, argv, env);
	int e = errno;
	signal(SIGPIPE, SIG_IGN);
	qx_fail_errno("exec", e);
}
