package cli

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ttkit/ttkit/internal/loopuid"
	"github.com/ttkit/ttkit/queued/api"
)

// pageProxy serves the status page of a daemon reached over a Unix socket
// (a system-mode queued, which listens on no TCP port) to this user's
// browser: a loopback listener that forwards the page's reads to the
// socket, where the daemon sees this process, so this user, as the
// caller. Anyone who could connect to the port would act as this user, so
// a connection whose socket another user owns (loopuid) is refused
// outright, and every request but the page's static files must carry a
// token of this proxy's own (in the printed address's fragment, as the
// daemon's page expects, or got for a one-time code at POST
// /page/session, as a browser web --open started does); only GET and
// HEAD are forwarded (the page only reads), and the same Host, Origin and
// fetch-site checks as the daemon's keep other web pages out.
type pageProxy struct {
	token string
	addr  string // host:port of the listener
	rp    *httputil.ReverseProxy
	codes *api.PageCodes
}

// connOwnerKey is the context key of a connection's owner check: nil when
// the connection is this user's or root's, else why it is refused.
type connOwnerKey struct{}

// connOwner is http.Server's ConnContext for the proxy: it finds, once
// per connection, whether the socket at its other end is this user's or
// root's.
func connOwner(ctx context.Context, c net.Conn) context.Context {
	uid, err := loopuid.Owner(c.LocalAddr(), c.RemoteAddr())
	switch {
	case err != nil:
		err = fmt.Errorf("who owns the connection from %s is unknown: %w", c.RemoteAddr(), err)
	case uid != 0 && int(uid) != os.Getuid():
		err = fmt.Errorf("the connection from %s is uid %d's, and this page is uid %d's", c.RemoteAddr(), uid, os.Getuid())
	}
	return context.WithValue(ctx, connOwnerKey{}, err)
}

// newPageProxy proxies to the daemon's socket at sock for a listener at
// addr.
func newPageProxy(sock, addr string) (*pageProxy, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("making the page's token: %w", err)
	}
	p := &pageProxy{token: hex.EncodeToString(b), addr: addr}
	p.codes = api.NewPageCodes(p.token)
	d := &net.Dialer{Timeout: 5 * time.Second}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "http", "localhost", "localhost"
			// The daemon knows the caller from the socket: nothing of the
			// browser's request speaks for it.
			for _, h := range []string{"Authorization", "Cookie", "Origin", "Referer", "Sec-Fetch-Site", "Sec-Fetch-Mode", "Sec-Fetch-Dest"} {
				pr.Out.Header.Del(h)
			}
		},
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return d.DialContext(ctx, "unix", sock)
			},
			MaxIdleConnsPerHost: 4,
		},
		FlushInterval: -1, // long-polls and log chunks as they come
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, "queued does not answer on "+sock+": "+err.Error(), http.StatusBadGateway)
		},
	}
	return p, nil
}

// pageURL is the address to print: the proxy's root with its token in
// the fragment, which the browser never sends.
func (p *pageProxy) pageURL() string {
	return "http://" + p.addr + "/#token=" + url.QueryEscape(p.token)
}

// codeURL is the address to start a browser on, whose command line every
// user may read: the proxy's root with a new one-time code in the
// fragment, which the page exchanges for the token.
func (p *pageProxy) codeURL() (string, error) {
	code, err := p.codes.Issue()
	if err != nil {
		return "", err
	}
	return "http://" + p.addr + "/#code=" + url.QueryEscape(code), nil
}

// exchange answers POST /page/session: the code in the body, once, for
// the proxy's token.
func (p *pageProxy) exchange(w http.ResponseWriter, r *http.Request) {
	code, err := api.ReadCode(r.Body)
	if err != nil {
		refuse(w, http.StatusBadRequest, err.Error())
		return
	}
	tok, err := p.codes.Exchange(code)
	if err != nil {
		refuse(w, http.StatusUnauthorized, err.Error()+": run tt-device-queue web --open again")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(api.PageSessionResponse{Token: tok})
}

// refuse answers a request the proxy does not forward.
func refuse(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, "{\"error\":%q}\n", msg)
}

func (p *pageProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	host, port, _ := net.SplitHostPort(r.Host)
	_, ownPort, _ := net.SplitHostPort(p.addr)
	if err, _ := r.Context().Value(connOwnerKey{}).(error); err != nil {
		refuse(w, http.StatusForbidden, "this page is served to its own user only: "+err.Error())
		return
	}
	switch {
	case port != ownPort || (host != "127.0.0.1" && host != "localhost"):
		refuse(w, http.StatusForbidden, fmt.Sprintf("Host %q is not this page's address", r.Host))
		return
	case r.Header.Get("Origin") != "" && r.Header.Get("Origin") != "http://"+r.Host:
		refuse(w, http.StatusForbidden, "requests from other web pages are refused")
		return
	case r.Header.Get("Sec-Fetch-Site") != "" && r.Header.Get("Sec-Fetch-Site") != "same-origin" && r.Header.Get("Sec-Fetch-Site") != "none":
		refuse(w, http.StatusForbidden, "cross-site requests are refused")
		return
	case r.URL.Path == api.PageSessionPath && r.Method == http.MethodPost:
		p.exchange(w, r)
		return
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		w.Header().Set("Allow", "GET, HEAD")
		refuse(w, http.StatusMethodNotAllowed, "the status page only reads: "+r.Method+" is not forwarded")
		return
	}
	if !slices.Contains(api.PagePaths, r.URL.Path) || r.URL.RawQuery != "" {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(p.token)) != 1 {
			refuse(w, http.StatusUnauthorized, "missing or wrong token: open the address tt-device-queue web printed")
			return
		}
	}
	p.rp.ServeHTTP(w, r)
}

// servePage serves the proxy on a new loopback port until ctx ends,
// calling ready once it listens with the page's address (to print) and
// a maker of one-time addresses (to start a browser on).
func servePage(ctx context.Context, sock string, ready func(page string, codeURL func() (string, error)) error) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listening for the page: %w", err)
	}
	p, err := newPageProxy(sock, ln.Addr().String())
	if err != nil {
		ln.Close()
		return err
	}
	hs := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second, ConnContext: connOwner}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	if err := ready(p.pageURL(), p.codeURL); err != nil {
		hs.Close()
		return err
	}
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		hs.Shutdown(sctx)
		hs.Close()
		return nil
	case err := <-served:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("serving the page: %w", err)
	}
}
