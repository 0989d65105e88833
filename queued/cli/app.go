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
	// progress draws the waiting line on stderr; clear it before printing
	// anything else there.
	progress *progress
}

func newApp(ctx context.Context, g *Globals, s Streams) *App {
	a := &App{Globals: g, Streams: s, ctx: ctx}
	a.progress = &progress{w: s.Err, live: isTerminal(s.Err)}
	return a
}

func (a *App) close() {
	if a.client != nil {
		a.client.Close()
	}
}

// connect returns the client for the daemon. Without --host or --port
// (or their variables) it is the Unix socket in the state directory
// (TT_DEVICE_LOG_DIR, as the daemon resolves it), which only the owner can
// listen on or connect to, and no token is sent. With them it is that TCP
// address, and the token from the state directory is sent only after the
// server there has proven it holds the same token (api.VerifyServer): a
// stranger listening on the port while queued is down learns nothing.
func (a *App) connect() (*api.Client, error) {
	if a.client != nil {
		return a.client, nil
	}
	dir, err := config.StateDir(os.LookupEnv)
	if err != nil {
		return nil, usageErr("%w", err)
	}
	a.stateDir = dir
	if strings.TrimSpace(a.Host) == "" && a.Port == 0 {
		sock := filepath.Join(dir, api.SocketFile)
		a.url = "unix://" + sock
		a.client = api.NewUnixClient(sock)
		return a.client, nil
	}
	if a.url, err = a.baseURL(); err != nil {
		return nil, err
	}
	token, err := api.ReadToken(dir)
	if errors.Is(err, api.ErrNoToken) {
		return nil, &Error{Code: ExitUsage, Err: fmt.Errorf("no token in %s, so queued has not run with this state directory.\n%s", dir, startHint)}
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
		return api.DefaultURL, nil
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
