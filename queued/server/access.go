package server

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/ttkit/ttkit/queued/account"
	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/scheduler"
	"github.com/ttkit/ttkit/queued/store"
)

// ErrForbidden refuses a caller another user's job on a shared daemon:
// answered 403.
var ErrForbidden = errors.New("forbidden")

// ErrConflict refuses a request the job's state or record does not allow
// (answered 409).
var ErrConflict = errors.New("conflict")

// errNoRecordedOwner refuses to resubmit, on a shared daemon, a job with
// no recorded owner: the copy would run as whoever asked, with the old
// job's environment, and no one can say whose that was.
var errNoRecordedOwner = errors.New("it has no recorded owner, so there is no one to run the copy as; submit the command again yourself")

// accessRules are the daemon's rules of who may do what, decided once at
// start from its mode. They are the one place in the server that knows
// the mode: every answer that differs between a user-mode daemon (one
// user's, where everyone who gets in is that user or root) and a shared
// one (system mode, every user of the host, each job its submitter's)
// asks them.
type accessRules struct {
	mode api.Mode
	// adminGID is the group whose members are admins on a shared daemon,
	// besides root; adminGroup is its name, for messages.
	adminGID   *uint32
	adminGroup string
}

// shared reports whether the daemon serves every user of the host.
func (ar *accessRules) shared() bool { return ar.mode.System() }

// caller is who made a request: the uid the kernel reported for the
// socket connection (SO_PEERCRED, read once per connection by
// ConnContext), or, over TCP, where only a holder of the daemon's token
// gets this far, the daemon's own user. Nothing in the request itself (a
// header, a body field) can change it.
type caller struct {
	uid uint32
}

// callerOf is r's caller.
func callerOf(r *http.Request) caller {
	if p, onSocket, err := PeerOf(r.Context()); onSocket && err == nil {
		return caller{uid: p.UID}
	}
	return caller{uid: uint32(os.Getuid())}
}

// userName is uid's user name, "uid N" when it has none. It is read from
// the user database each time (about 10 µs), never remembered: a uid
// given to a new user must record the new name, or the job would look
// like the old user's and be refused at start.
func userName(uid uint32) string { return account.Name(uid) }

// admin reports whether c may act on every user's jobs: root, the
// daemon's own user, and, on a shared daemon, members of the admin group
// (read from the user database on each check, so a change takes effect at
// once).
func (ar *accessRules) admin(c caller) bool {
	if c.uid == 0 || int(c.uid) == os.Getuid() {
		return true
	}
	if !ar.shared() || ar.adminGID == nil {
		return false
	}
	a, err := account.LookupUID(c.uid)
	return err == nil && a.Member(*ar.adminGID)
}

// Admins is who are admins of a daemon in mode whose admin group is
// adminGID (nil: none), as Config.AdminGID makes them: root, queued's own
// user and, on a shared daemon, the group's members, read from the user
// database on each call. The scheduler exempts them from the per-user
// shares with it.
func Admins(mode api.Mode, adminGID *uint32) func(uid uint32) bool {
	ar := &accessRules{mode: mode, adminGID: adminGID}
	return func(uid uint32) bool { return ar.admin(caller{uid: uid}) }
}

// owns reports whether c submitted the job.
func owns(c caller, rec *store.Job) bool {
	return rec.OwnerUID != nil && *rec.OwnerUID == c.uid
}

// access is what one request's caller may do with jobs. Whether the
// caller is an admin is read from the user database at most once per
// request, and only for a job that is not theirs: a list of many other
// users' jobs costs one lookup, not one per job.
type access struct {
	rules   *accessRules
	c       caller
	checked bool // isAdmin has been looked up
	isAdmin bool
}

// of is r's access.
func (ar *accessRules) of(r *http.Request) *access { return &access{rules: ar, c: callerOf(r)} }

func (a *access) admin() bool {
	if !a.checked {
		a.isAdmin, a.checked = a.rules.admin(a.c), true
	}
	return a.isAdmin
}

// owned reports whether the job is the caller's own: on a user-mode
// daemon every job is its user's, on a shared one those it submitted.
func (a *access) owned(rec *store.Job) bool {
	return !a.rules.shared() || owns(a.c, rec)
}

// allowed reports whether the caller may read the job's record and output
// (see) or stop it (see false). On a user-mode daemon everyone who gets in
// is its user or root, so everything is allowed. On a shared one a job is
// its owner's and the admins'; the record and output of a reset or a
// hold are everyone's (they are about the card: a Slurm job's TaskProlog,
// run as the job's user, waits on the hold root's Prolog took), stopping
// or releasing one is not.
func (a *access) allowed(rec *store.Job, see bool) bool {
	return a.owned(rec) || (see && (rec.Kind == store.KindReset || rec.Kind == store.KindHold)) || a.admin()
}

// mayTouch is nil when allowed, else the refusal, naming the owner.
func (a *access) mayTouch(rec *store.Job, see bool) error {
	if a.allowed(rec, see) {
		return nil
	}
	owner := "no recorded owner"
	if rec.OwnerUID != nil {
		owner = fmt.Sprintf("%s (uid %d)", rec.Owner, *rec.OwnerUID)
	}
	return fmt.Errorf("job %s belongs to %s, not to %s (uid %d): only its owner and admins (%s) may see its record or output or stop it: %w",
		rec.ID, owner, userName(a.c.uid), a.c.uid, a.rules.adminsText(), ErrForbidden)
}

// adminsText says who the admins are, for refusals.
func (ar *accessRules) adminsText() string {
	if ar.adminGroup != "" {
		return "root and members of group " + ar.adminGroup
	}
	return "root; set TT_DEVICE_ADMIN_GROUP to name more"
}

// redact hides the parts of another user's job that are not everyone's
// to see on a shared daemon: its environment, working directory and
// error (which may name its paths); the command, card, state, outcome and
// owner stay, as ps shows every user's processes.
func redact(a *access, j *api.Job, rec *store.Job) {
	if a.allowed(rec, true) {
		return
	}
	j.Env, j.EnvFromShell, j.Cwd = nil, nil, ""
	if j.Error != "" {
		j.Error = "(only its owner and admins may see why)"
	}
}

// callerView is the caller as GET /status shows it.
func (ar *accessRules) callerView(r *http.Request) *api.Caller {
	c := callerOf(r)
	return &api.Caller{UID: c.uid, User: userName(c.uid), Admin: ar.admin(c)}
}

// resetPolicy, on a shared daemon, records who asks for a reset and keeps
// a non-admin's reset from interrupting another user's running job.
func (ar *accessRules) resetPolicy(r *http.Request, req *scheduler.ResetRequest) {
	if !ar.shared() {
		return
	}
	c := callerOf(r)
	uid := c.uid
	req.OwnerUID, req.Owner = &uid, userName(uid)
	if !ar.admin(c) {
		req.MayInterrupt = func(running store.Job) bool { return owns(c, &running) }
	}
}

// callerName is who made r, as a release or a record names them: the
// user on a shared daemon, "the daemon's user" on a user daemon.
func (ar *accessRules) callerName(r *http.Request) string {
	if !ar.shared() {
		return "the daemon's user"
	}
	c := callerOf(r)
	return fmt.Sprintf("%s (uid %d)", userName(c.uid), c.uid)
}

// mayForce reports whether r's caller may force a reset past a hold or
// a process of someone else holding the card: an admin on a shared
// daemon; the one user on a user daemon. (A holder's owner needs no
// force: a user's reset never waits for that user's own processes.)
func (ar *accessRules) mayForce(r *http.Request) bool {
	return !ar.shared() || ar.admin(callerOf(r))
}

// ownerOf is the submitter of a new job on a shared daemon; on a user
// daemon every job is its user's, and the client id tells them apart.
func (ar *accessRules) ownerOf(r *http.Request) (*uint32, string) {
	if !ar.shared() {
		return nil, ""
	}
	uid := callerOf(r).uid
	return &uid, userName(uid)
}

// copyOwner is whose a copy of rec (POST /resubmit) is: on a shared
// daemon rec's owner, whoever asks, and a refusal (409) when rec has
// none; on a user daemon, as every job, its user's.
func (ar *accessRules) copyOwner(rec *store.Job) (*uint32, string, error) {
	if !ar.shared() {
		return nil, "", nil
	}
	if rec.OwnerUID == nil {
		return nil, "", fmt.Errorf("resubmitting job %s: %w: %w", rec.ID, errNoRecordedOwner, ErrConflict)
	}
	uid := *rec.OwnerUID
	return &uid, rec.Owner, nil
}

// mine narrows f to the caller's own jobs (GET /jobs?mine=1): on a shared
// daemon those the kernel says it submitted, whatever client id they
// carry; on a user daemon, where every job is its user's, f's client id
// tells them apart.
func (ar *accessRules) mine(r *http.Request, f *scheduler.ListFilter) {
	if ar.shared() {
		uid := callerOf(r).uid
		f.OwnerUID, f.ClientID = &uid, ""
	}
}

// probesCwd reports whether queued looks at a submission's working
// directory itself. A shared daemon is root: what it could stat says
// nothing of what the job's user may enter, and its answer would tell any
// user which of root's paths exist. The job checks it when it starts, as
// its user (runner: "working directory ... permission denied for user").
func (ar *accessRules) probesCwd() bool { return !ar.shared() }

// defaultCwd is the working directory of a submission that names none: on
// a shared daemon the caller's home directory from the user database
// (never the root daemon's own directory), else the daemon's working
// directory, where the Python tool's server runs such a job.
func (ar *accessRules) defaultCwd(r *http.Request) (string, error) {
	if ar.shared() {
		uid := callerOf(r).uid
		a, err := account.LookupUID(uid)
		if err != nil {
			return "", fieldErr("cwd", "omitted, and the home directory of uid %d is unknown (%v): give cwd", uid, err)
		}
		if !filepath.IsAbs(a.Home) {
			return "", fieldErr("cwd", "omitted, and %s's home directory %q is not an absolute path: give cwd", a.Name, a.Home)
		}
		return a.Home, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fieldErr("cwd", "omitted, and queued's own working directory is unknown (%v): give cwd", err)
	}
	return wd, nil
}
