package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/config"
	"github.com/ttkit/ttkit/queued/defaults"
)

// App is what every command's Run receives: the global options, the
// streams, a context that SIGINT cancels, and the daemon connection, made
// on first use so that commands such as completion work without a daemon.
type App struct {
	*Globals
	Streams

	// ctx is cancelled with errInterrupted on SIGINT or SIGTERM.
	ctx      context.Context
	client   *api.Client
	url      string
	stateDir string
	// via says which daemon connect chose (viaTCP, viaOwn, ...).
	via int
	// progress draws the waiting line on stderr; clear it before printing
	// anything else there.
	progress *progress
	// systemSocket is the host's system-mode daemon's socket
	// (api.SystemSocket; a test's own elsewhere).
	systemSocket string
	// quiet keeps connect from saying it fell back to the system-mode
	// daemon, for the completion scripts' hidden command.
	quiet bool
}

func newApp(ctx context.Context, g *Globals, s Streams) *App {
	a := &App{Globals: g, Streams: s, ctx: ctx, systemSocket: api.SystemSocket}
	a.progress = &progress{w: s.Err, live: isTerminal(s.Err)}
	return a
}

func (a *App) close() {
	if a.client != nil {
		a.client.Close()
	}
}

// connect returns the client for the daemon, chosen in this order:
//
//   - --host unix:///path (TT_DEVICE_URL): the daemon on that socket, with
//     no token; the daemon knows the caller from the kernel.
//   - --host or --port otherwise (or their variables): that TCP address,
//     and the token from the state directory is sent only after the server
//     there has proven it holds the same token (api.VerifyServer): a
//     stranger listening on the port while queued is down learns nothing.
//   - Neither: the Unix socket in the state directory (TT_DEVICE_LOG_DIR,
//     as the daemon resolves it), which only the owner can listen on or
//     connect to, when a daemon answers there; else the host's system-mode
//     daemon at api.SystemSocket, which it says on stderr once (see
//     noteFallback). No token is sent to either, and the CLI
//     never falls back to TCP.
func (a *App) connect() (*api.Client, error) {
	if a.client != nil {
		return a.client, nil
	}
	// Without HOME there is no state directory, and none is needed to
	// reach a socket: only a TCP address (its token) or the user's own
	// daemon (its socket) lives there.
	dir, dirErr := config.StateDir(os.LookupEnv)
	if dirErr != nil && !errors.Is(dirErr, config.ErrNoHome) {
		return nil, usageErr("%w", dirErr)
	}
	a.stateDir = dir
	host := strings.TrimSpace(a.Host)
	sock, isUnix, err := unixSocketPath(host)
	switch {
	case err != nil:
		return nil, err
	case isUnix && a.Port != 0:
		return nil, usageErr("--port %d with --host %q: a Unix socket has no port; give one or the other (TT_DEVICE_PORT, TT_DEVICE_URL)", a.Port, host)
	case isUnix:
		a.via = viaGiven
		return a.useSocket(sock), nil
	case host == "" && a.Port == 0:
		own := ""
		if dirErr == nil {
			own = filepath.Join(dir, api.SocketFile)
		}
		sock, isSystem, err := pickSocket(a.ctx, own, a.systemSocket)
		if err != nil {
			return nil, err
		}
		a.via = viaOwn
		if isSystem {
			a.via = viaSystem
			a.noteFallback(dir, own, sock)
		}
		return a.useSocket(sock), nil
	}
	a.via = viaTCP
	if dirErr != nil {
		return nil, usageErr("%w (a TCP address's token is read from there; a socket's address, unix:///path, needs none)", dirErr)
	}
	if a.url, err = a.baseURL(); err != nil {
		return nil, err
	}
	token, err := api.ReadToken(dir)
	if errors.Is(err, api.ErrNoToken) {
		return nil, &Error{Code: ExitUnreachable, Err: fmt.Errorf("no token in %s, so queued has not run with this state directory.\n%s", dir, startHint)}
	}
	if err != nil {
		return nil, &Error{Code: ExitUsage, Err: err}
	}
	if err := api.VerifyServer(a.ctx, a.url, token); err != nil {
		if errors.Is(err, api.ErrUnproven) {
			return nil, &Error{Code: ExitRefused, Err: fmt.Errorf("not sending the token to %s: %w.\nIs something other than your queued listening there? (Without --host and --port, tt-device-queue talks to queued over %s.)",
				a.url, err, filepath.Join(dir, api.SocketFile))}
		}
		return nil, a.explain(a.ctx, err)
	}
	a.client = api.NewClient(a.url, token)
	return a.client, nil
}

// noteFallback says on stderr, once per command (connect runs once),
// that the user's own queued did not answer and the host's shared one at
// sock is used instead: jobs then go to the shared queue, run under its
// settings and are listed there. It says nothing to a user whose own
// queued never ran (no token in the state directory dir): for them the
// shared queued is the only one.
func (a *App) noteFallback(dir, own, sock string) {
	if a.quiet || own == "" {
		return
	}
	if _, err := os.Stat(filepath.Join(dir, api.TokenFile)); err != nil {
		return
	}
	a.progress.note("your own queued does not answer at unix://%s, so this goes to the host's shared queued at unix://%s (systemctl --user start queued to use yours)", own, sock)
}

// useSocket makes the client for the daemon on the Unix socket at path.
func (a *App) useSocket(path string) *api.Client {
	a.url = "unix://" + path
	a.client = api.NewUnixClient(path)
	return a.client
}

// clientID is --client-id (TT_QUEUE_CLIENT_ID), else the user name, so
// jobs carry an owner and list --mine works without setting anything.
func (a *App) clientID() string {
	if id := strings.TrimSpace(a.ClientID); id != "" {
		return id
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if name := os.Getenv("USER"); name != "" {
		return name
	}
	return "uid-" + strconv.Itoa(os.Getuid())
}

// baseURL resolves the daemon's address.
func (a *App) baseURL() (string, error) {
	host, port := strings.TrimSpace(a.Host), a.Port
	if port < 0 || port > 65535 {
		return "", usageErr("--port %d: want a TCP port, 1-65535", port)
	}
	if host == "" && port == 0 {
		return defaults.URL, nil
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if strings.Contains(host, "://") {
		u, err := url.Parse(host)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return "", usageErr("--host %q: want a host name or a URL such as http://127.0.0.1:5741 (TT_DEVICE_URL)", host)
		}
		if port != 0 {
			u.Host = net.JoinHostPort(u.Hostname(), strconv.Itoa(port))
		}
		return strings.TrimRight(u.String(), "/"), nil
	}
	if port == 0 {
		port = config.DefaultPort
	}
	return "http://" + net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(port)), nil
}

// isTerminal reports whether w (a stream) is a terminal, for the live
// progress line, colour and questions.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// colour reports whether stdout may carry ANSI colour: a terminal, and
// NO_COLOR unset or empty (https://no-color.org).
func (a *App) colour() bool {
	return os.Getenv("NO_COLOR") == "" && isTerminal(a.Out)
}
