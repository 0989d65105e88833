package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/ttkit/ttkit/queued/api"
)

// Which daemon the CLI talks to, for messages.
const (
	viaTCP    = iota // --host or --port: a TCP address, with the token
	viaOwn           // the socket in the user's state directory
	viaSystem        // api.SystemSocket, since the user's own daemon did not answer
	viaGiven         // a unix:// URL in --host (TT_DEVICE_URL)
)

// unixExample is how a unix URL looks, for messages.
const unixExample = "unix://" + api.SystemSocket

// unixSocketPath returns the socket path of raw when raw is a unix URL
// (unix:///absolute/path, the scheme in any case); ok is false for
// anything else (a host name, an http URL). The path is taken literally,
// with no percent-decoding, so what is typed is what is dialled; a URL
// that is not unix:// plus an absolute path that fits in a socket
// address is a usage error naming it.
func unixSocketPath(raw string) (path string, ok bool, err error) {
	scheme, rest, found := strings.Cut(raw, ":")
	if !found || !strings.EqualFold(scheme, "unix") {
		return "", false, nil
	}
	bad := func(why string) (string, bool, error) {
		return "", true, usageErr("--host %q: %s; want unix:// and the socket's absolute path, such as %s (TT_DEVICE_URL)", raw, why, unixExample)
	}
	path, found = strings.CutPrefix(rest, "//")
	switch {
	case !found:
		return bad("no // after unix:")
	case path == "":
		return bad("no socket path")
	case !filepath.IsAbs(path):
		return bad("the socket path " + strconv.Quote(path) + " is not absolute (a host is not allowed before it)")
	case strings.ContainsAny(path, "?#\x00"):
		return bad("a socket path has no query, fragment or NUL")
	}
	path = filepath.Clean(path)
	if len(path) > api.MaxSocketPath {
		return bad(fmt.Sprintf("the socket path is %d bytes, more than a socket address holds (%d)", len(path), api.MaxSocketPath))
	}
	return path, true, nil
}

// pickSocket chooses the daemon when nothing names one: the user's own
// (own, the socket in the state directory) when it answers, else the
// host's system-mode daemon (system). "Answers" means a connection is
// made within the client's dial timeout; a socket file left by a daemon
// that stopped does not. When neither answers, the error (exit 1) names
// both places, what went wrong at each and how to get a daemon. own is
// "" when there is no state directory (HOME unset): only the system
// daemon is tried.
func pickSocket(ctx context.Context, own, system string) (path string, isSystem bool, err error) {
	ownErr := errNoOwnSocket
	if own != "" {
		ownErr = api.ProbeUnix(ctx, own)
	}
	if ownErr == nil {
		return own, false, nil
	}
	if err := context.Cause(ctx); err != nil {
		return "", false, &Error{Code: ExitInterrupted, Err: err}
	}
	sysErr := api.ProbeUnix(ctx, system)
	if sysErr == nil {
		return system, true, nil
	}
	if err := context.Cause(ctx); err != nil {
		return "", false, &Error{Code: ExitInterrupted, Err: err}
	}
	return "", false, &Error{Code: ExitUnreachable, Err: &noDaemonError{own: own, system: system, ownErr: ownErr, sysErr: sysErr}}
}

// errNoOwnSocket is why the user's own daemon was not tried: without HOME
// there is no state directory to find its socket in.
var errNoOwnSocket = errors.New("HOME is unset, so there is no state directory to find it in (set TT_DEVICE_LOG_DIR)")

// noDaemonError is pickSocket's error when neither daemon answers. It
// unwraps to both dial errors, so errors.Is finds ENOENT or ECONNREFUSED.
type noDaemonError struct {
	own, system    string
	ownErr, sysErr error
}

func (e *noDaemonError) Error() string {
	// "Not running" only when that is what both answers say: a socket
	// the caller may not use is someone else's queue, running or not.
	hint := "queued is not running (or not at these addresses). "
	if denied(e.ownErr) || denied(e.sysErr) {
		hint = ""
	}
	return fmt.Sprintf("cannot reach queued at unix://%s (your own: %s) nor at unix://%s (the host's shared one: %s)\n"+
		"%sStart your own with `systemctl --user start queued`, or run `queued` in another terminal; "+
		"the host's shared queued (system mode) is its admin's to start; for a socket elsewhere, set TT_DEVICE_URL=unix:///path/to/queued.sock",
		e.own, socketTrouble(e.ownErr, viaOwn), e.system, socketTrouble(e.sysErr, viaSystem), hint)
}

// denied reports whether err is the kernel refusing the caller access.
func denied(err error) bool {
	return errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)
}

func (e *noDaemonError) Unwrap() []error { return []error{e.ownErr, e.sysErr} }

// socketTrouble says why a socket did not answer: the innermost error
// (such as "connect: no such file or directory") and what it means for
// that kind of socket.
func socketTrouble(err error, via int) string {
	var op *net.OpError
	if errors.As(err, &op) {
		err = op.Err
	}
	msg := err.Error()
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		msg += "; a socket left over from a stop or a crash"
	case denied(err) && via == viaSystem:
		msg += "; only the group it is shared with may use it (TT_DEVICE_SOCKET_GROUP): ask the host's admin"
	case denied(err):
		msg += "; its state directory (TT_DEVICE_LOG_DIR) belongs to someone else"
	}
	return msg
}

// daemonLine is the first line of status: which daemon answered, where,
// and, from a shared (system-mode) daemon, who it takes the caller to be.
// A user-mode daemon's line stays short: it is the caller's own.
func daemonLine(st api.Status, at string) string {
	s := "queued"
	if st.Version != "" {
		s += " " + st.Version
	}
	mode := modeOf(st)
	if mode != api.UserMode {
		s += " (" + mode.String() + " mode)"
	}
	s += " at " + at
	if c := st.Caller; c != nil && mode.System() {
		s += "; you are " + ownerText(c.User, &c.UID)
		if c.Admin {
			s += ", an admin"
		}
	}
	return s
}

// ownerText names a user: "alice (uid 1001)", or whichever half is known;
// "" when neither is.
func ownerText(name string, uid *uint32) string {
	switch {
	case name != "" && uid != nil:
		return fmt.Sprintf("%s (uid %d)", name, *uid)
	case uid != nil:
		return fmt.Sprintf("uid %d", *uid)
	}
	return name
}

// withAgent adds to an owner cell the AI agent that queued the job
// through tt-device-queue mcp, if one did: "alice (agent: claude-code)",
// so a person sees which jobs an agent queued. The name is escaped as
// every other text someone else chose.
func withAgent(owner, agent string) string {
	if agent == "" {
		return owner
	}
	return owner + " (agent: " + termText(oneLine(agent)) + ")"
}

// ownerCell is who a job is shown as belonging to in tables: its owner's
// name (or uid), which a system-mode daemon records, else the client id it
// was submitted under (a user-mode daemon's jobs are all its user's, and
// the client id tells them apart), else "-".
func ownerCell(owner string, uid *uint32, clientID string) string {
	if owner != "" {
		return owner
	}
	if uid != nil {
		return "uid " + strconv.FormatUint(uint64(*uid), 10)
	}
	if clientID != "" {
		return clientID
	}
	return "-"
}

// modeOf is the mode the daemon's status reports; an empty one (a daemon
// from before modes were reported) is user mode, and one this CLI does
// not know is kept as given, to be shown, and is not system mode.
func modeOf(st api.Status) api.Mode {
	m, err := api.ParseMode(string(st.Mode))
	if err != nil {
		return api.Mode(st.Mode)
	}
	return m
}
