package cli

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/config"
)

// WebCmd prints the address of queued's live status page with the token
// in its fragment: the browser keeps the fragment to itself, so the token
// never travels in a request line, a log or a Referer; the page sends it
// as the bearer token. The address is printed to the user's own terminal
// only. It opens a browser only when asked, and then never on that
// address: a browser's command line is every local user's to read (ps),
// so the browser is given a one-time code instead, which the page
// exchanges for a token that only reads the page's data (see pageLogin
// in the server).
type WebCmd struct {
	Open bool `help:"Also open the page in a browser ($BROWSER, else xdg-open), on a one-time code: a browser's command line is every user's to read, so it never gets the token."`
}

// Help says what the page shows and who may see it.
func (c *WebCmd) Help() string {
	return "The page is read-only: every card, its running job with a live tail of its output, its queue, resets and " +
		"processes holding it outside the queue. It updates within a second of a change. Anyone with the address " +
		"can read the queue until queued restarts with a new token, so share it as you would the token file. " +
		"A queued reached over a Unix socket (the host's system-mode queued, or TT_DEVICE_URL=unix://...) has no TCP " +
		"address: web then serves the page itself, on a loopback port with a token of its own, as you, until Ctrl-C."
}

// webURL is the status page's address for the daemon at base with key
// ("token" or "code") set to value in its fragment.
func webURL(base, key, value string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("queued's address %q is not an http URL", base)
	}
	u.Path, u.RawQuery, u.Fragment = "/", "", ""
	return u.String() + "#" + key + "=" + url.QueryEscape(value), nil
}

// Run finds queued's TCP address (--host/--port, else the address queued
// recorded in its state directory), checks that the server there proves
// it holds the token, and prints the page's URL. A daemon reached over a
// Unix socket (a unix:// --host, or no address recorded: the host's
// system-mode queued) gets its page served by this command (proxy).
func (c *WebCmd) Run(a *App) error {
	dir, err := config.StateDir(os.LookupEnv)
	if err != nil {
		return usageErr("%w", err)
	}
	a.stateDir = dir
	_, isUnix, err := unixSocketPath(strings.TrimSpace(a.Host))
	if err != nil {
		return err
	}
	base := ""
	switch {
	case isUnix:
		return c.proxy(a)
	case strings.TrimSpace(a.Host) != "" || a.Port != 0:
		if base, err = a.baseURL(); err != nil {
			return err
		}
	default:
		if base, err = api.ReadAddress(dir); err != nil {
			// No daemon of this user's records a TCP address: the host's
			// system-mode queued, on its socket, if that is what answers.
			return c.proxy(a)
		}
	}
	token, err := api.ReadToken(dir)
	if errors.Is(err, api.ErrNoToken) {
		return &Error{Code: ExitUnreachable, Err: fmt.Errorf("no token in %s, so queued has not run with this state directory.\n%s", dir, startHint)}
	}
	if err != nil {
		return &Error{Code: ExitUsage, Err: err}
	}
	if err := api.VerifyServer(a.ctx, base, token); err != nil {
		if errors.Is(err, api.ErrUnproven) {
			return &Error{Code: ExitRefused, Err: fmt.Errorf("not giving out the token for %s: %w (is something other than your queued listening there?)", base, err)}
		}
		return a.explain(a.ctx, err)
	}
	page, err := webURL(base, "token", token)
	if err != nil {
		return &Error{Code: ExitRefused, Err: err}
	}
	if a.JSON {
		if err := a.printJSON(map[string]string{"url": page}); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(a.Out, page)
	}
	if !c.Open {
		return nil
	}
	client := api.NewClient(base, token)
	defer client.Close()
	code, err := client.PageCode(a.ctx)
	if err != nil {
		return a.explain(a.ctx, fmt.Errorf("--open: asking queued for a one-time code to open the page with: %w", err))
	}
	opened, err := webURL(base, "code", code.Code)
	if err != nil {
		return &Error{Code: ExitRefused, Err: err}
	}
	return openBrowser(opened)
}

// proxy serves the page of the daemon the CLI reaches over a Unix socket
// (a system-mode queued has no TCP port, and its socket knows the caller
// from the kernel) on a loopback port of this command, until Ctrl-C: see
// pageProxy.
func (c *WebCmd) proxy(a *App) error {
	if _, err := a.connect(); err != nil {
		return err
	}
	sock := strings.TrimPrefix(a.url, "unix://")
	err := servePage(a.ctx, sock, func(page string, codeURL func() (string, error)) error {
		if a.JSON {
			if err := a.printJSON(map[string]string{"url": page}); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(a.Err, "Serving the status page of queued at %s, as you, until Ctrl-C:\n", a.url)
			fmt.Fprintln(a.Out, page)
		}
		if c.Open {
			opened, err := codeURL()
			if err != nil {
				return err
			}
			return openBrowser(opened)
		}
		return nil
	})
	if err != nil {
		return &Error{Code: ExitRefused, Err: err}
	}
	return nil
}

// openBrowser starts $BROWSER, else xdg-open, on page and does not wait
// for it. page is in the browser's command line, which every user of the
// host may read: it must hold no secret that outlives one use (a
// one-time code, never a token).
func openBrowser(page string) error {
	prog := os.Getenv("BROWSER")
	if prog == "" {
		prog = "xdg-open"
	}
	path, err := exec.LookPath(prog)
	if err != nil {
		return &Error{Code: ExitUsage, Err: fmt.Errorf("--open: no browser to start: %w (set BROWSER, or open the address above yourself)", err)}
	}
	cmd := exec.Command(path, page)
	if err := cmd.Start(); err != nil {
		return &Error{Code: ExitRefused, Err: fmt.Errorf("--open: starting %s: %w", path, err)}
	}
	go cmd.Wait() // reap it; the browser outlives us or not, either is fine
	return nil
}
