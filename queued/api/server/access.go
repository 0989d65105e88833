package server

import (
	"errors"
	"fmt"
	"net/http"
	"os"

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
func (s *Server) admin(c caller) bool {
	if c.uid == 0 || int(c.uid) == os.Getuid() {
		return true
	}
	if !s.cfg.Shared || s.cfg.AdminGID == nil {
		return false
	}
	a, err := account.LookupUID(c.uid)
	return err == nil && a.Member(*s.cfg.AdminGID)
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
	s       *Server
	c       caller
	checked bool // isAdmin has been looked up
	isAdmin bool
}

// accessOf is r's access.
func (s *Server) accessOf(r *http.Request) *access { return &access{s: s, c: callerOf(r)} }

func (a *access) admin() bool {
	if !a.checked {
		a.isAdmin, a.checked = a.s.admin(a.c), true
	}
	return a.isAdmin
}

// allowed reports whether the caller may read the job's record and output
// (see) or stop it (see false). On a user-mode daemon everyone who gets in
// is its user or root, so everything is allowed. On a shared one a job is
// its owner's and the admins'; the record and output of a reset are
// everyone's (they are about the card), stopping one is not.
func (a *access) allowed(rec *store.Job, see bool) bool {
	return !a.s.cfg.Shared || owns(a.c, rec) || (see && rec.Kind == store.KindReset) || a.admin()
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
		rec.ID, owner, userName(a.c.uid), a.c.uid, a.s.adminsText(), ErrForbidden)
}

// mayTouch is accessOf(r).mayTouch, for a request about one job.
func (s *Server) mayTouch(r *http.Request, rec *store.Job, see bool) error {
	return s.accessOf(r).mayTouch(rec, see)
}

// adminsText says who the admins are, for refusals.
func (s *Server) adminsText() string {
	if s.cfg.AdminGroup != "" {
		return "root and members of group " + s.cfg.AdminGroup
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
func (s *Server) callerView(r *http.Request) *api.Caller {
	c := callerOf(r)
	return &api.Caller{UID: c.uid, User: userName(c.uid), Admin: s.admin(c)}
}

// mode names the daemon's mode for GET /status.
func (s *Server) mode() string {
	if s.cfg.Shared {
		return "system"
	}
	return "user"
}

// resetPolicy, on a shared daemon, records who asks for a reset and keeps
// a non-admin's reset from interrupting another user's running job.
func (s *Server) resetPolicy(r *http.Request, req *scheduler.ResetRequest) {
	if !s.cfg.Shared {
		return
	}
	c := callerOf(r)
	uid := c.uid
	req.OwnerUID, req.Owner = &uid, userName(uid)
	if !s.admin(c) {
		req.MayInterrupt = func(running store.Job) bool { return owns(c, &running) }
	}
}

// ownerOf is the submitter of a new job on a shared daemon; on a user
// daemon every job is its user's, and the client id tells them apart.
func (s *Server) ownerOf(r *http.Request) (*uint32, string) {
	if !s.cfg.Shared {
		return nil, ""
	}
	uid := callerOf(r).uid
	return &uid, userName(uid)
}
