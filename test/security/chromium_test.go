//go:build chromium

package security

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// rebindHost is the attacker's name; Chromium is told it resolves to
// the proxy, which plays both its web server and, once "rebound", the
// daemon.
const rebindHost = "evil.example"

// TestChromiumCannotSubmit loads, in a real headless Chromium, a page
// from another loopback port that tries every way a web page has to
// submit a job (no-cors and CORS fetches, a preflighted JSON fetch, form
// POSTs with text/plain and urlencoded bodies, an image and a frame
// GET), plus a frame whose host name is rebound to the daemon's address,
// so that its requests are same-origin as far as the browser knows. Every
// request passes a recording proxy that checks it reached the daemon and
// was refused; the store shows nothing was enqueued.
func TestChromiumCannotSubmit(t *testing.T) {
	browser := findChromium(t)
	tg := startTarget(t)
	daemonPort := tg.host[strings.LastIndexByte(tg.host, ':')+1:]
	body, err := json.Marshal(map[string]string{"cmd": tg.hostileCmd("browser"), "cwd": tg.work, "device_id": "0"})
	if err != nil {
		t.Fatal(err)
	}
	rebindOrigin := "http://" + rebindHost + ":" + daemonPort

	reports := make(chan [2]string, 64)
	pages := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		switch r.URL.Path {
		case "/report":
			select {
			case reports <- [2]string{r.URL.Query().Get("name"), r.URL.Query().Get("what")}:
			default:
			}
			w.WriteHeader(http.StatusNoContent)
		case "/attack":
			fmt.Fprint(w, attackPage(tg.d.URL, rebindOrigin, string(body)))
		case "/rebind":
			fmt.Fprint(w, rebindPage(string(body)))
		default:
			http.NotFound(w, r)
		}
	}))
	defer pages.Close()
	pageHost := strings.TrimPrefix(pages.URL, "http://")

	// The proxy sends the daemon's host and port, and every path but
	// /rebind on the rebound name, to the daemon (keeping the Host the
	// browser sent); the page host to the page server.
	px := &recorder{daemon: tg.host, pages: pageHost, rebound: rebindHost + ":" + daemonPort}
	proxy := httptest.NewServer(px)
	defer proxy.Close()

	// The page reports each attempt to /report; the browser runs until
	// all are in, then gets SIGTERM (its whole process
	// group, so no renderer outlives the test).
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	profile := t.TempDir()
	cmd := exec.Command(browser,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-extensions", "--disable-default-apps", "--user-data-dir="+profile,
		"--proxy-server="+proxy.URL, "--proxy-bypass-list=<-loopback>",
		"--host-resolver-rules=MAP "+rebindHost+" 127.0.0.1",
		pages.URL+"/attack")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), "HOME="+profile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	attempts := []string{"fetch no-cors", "fetch cors text/plain", "fetch cors json", "form text/plain", "form urlencoded", "img", "frame", "rebind post", "rebind get"}
	results := map[string]string{}
collect:
	for len(results) < len(attempts) {
		select {
		case r := <-reports:
			results[r[0]] = r[1]
		case err := <-exited:
			t.Fatalf("chromium exited early: %v\n%s", err, tail(stderr.String(), 3000))
		case <-ctx.Done():
			t.Errorf("the page reported only %d results within 60s", len(results))
			break collect
		}
	}
	stopGroup(cmd.Process.Pid, exited)

	for _, want := range attempts {
		if _, ok := results[want]; !ok {
			t.Errorf("the page reported no result for %q", want)
		}
	}
	for name, res := range results {
		t.Logf("page: %s: %s", name, res)
	}
	for _, name := range []string{"fetch cors text/plain", "fetch cors json"} {
		if !strings.Contains(results[name], "TypeError") {
			t.Errorf("%s: the page could read the answer: %s", name, results[name])
		}
	}
	for _, name := range []string{"rebind post", "rebind get"} {
		if !strings.HasPrefix(results[name], "403") {
			t.Errorf("%s: want a 403 the rebound page can read, got %s", name, results[name])
		}
	}

	reached := px.daemonRequests()
	kinds := map[string]bool{}
	for _, rq := range reached {
		t.Logf("daemon answered %d to %s %s (Host %s, Origin %q, Sec-Fetch-Site %q)", rq.status, rq.method, rq.path, rq.host, rq.origin, rq.site)
		if rq.status != http.StatusForbidden && rq.status != http.StatusUnauthorized {
			t.Errorf("the daemon answered %d to the browser's %s %s", rq.status, rq.method, rq.path)
		}
		kinds[rq.method+" "+rq.path+" "+rq.host] = true
	}
	for _, want := range []string{"POST /queue " + tg.host, "OPTIONS /queue " + tg.host, "GET /status " + tg.host, "POST /queue " + px.rebound, "GET /status " + px.rebound} {
		if !kinds[want] {
			t.Errorf("no %s reached the daemon; the test would prove nothing", want)
		}
	}
	tg.assertNothingEnqueued(t)
}

// stopGroup ends chromium's process group: SIGTERM, then SIGKILL if it
// has not exited within 10 seconds.
func stopGroup(pid int, exited <-chan error) {
	syscall.Kill(-pid, syscall.SIGTERM)
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
		syscall.Kill(-pid, syscall.SIGKILL)
		<-exited
	}
	syscall.Kill(-pid, syscall.SIGKILL) // any helper left in the group
}

func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("skipping: no chromium binary on PATH (install Debian's chromium package or set CHROMIUM)")
	return ""
}

// recorder is a forward HTTP proxy that records what the daemon answered.
type recorder struct {
	daemon, pages, rebound string

	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct {
	method, path, host, origin, site string
	status                           int
}

func (p *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	backend := ""
	switch {
	case host == p.pages || host == p.rebound && r.URL.Path == "/rebind":
		backend = p.pages
	case host == p.daemon || host == p.rebound:
		backend = p.daemon
	default:
		http.Error(w, "the test proxy serves only the page and the daemon", http.StatusBadGateway)
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = &url.URL{Scheme: "http", Host: backend, Path: pr.In.URL.Path, RawPath: pr.In.URL.RawPath, RawQuery: pr.In.URL.RawQuery}
			pr.Out.Host = pr.In.Host
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			w.WriteHeader(http.StatusBadGateway) // the browser went away
		},
		ModifyResponse: func(resp *http.Response) error {
			if backend == p.daemon {
				p.mu.Lock()
				p.seen = append(p.seen, seenRequest{method: r.Method, path: r.URL.Path, host: host,
					origin: r.Header.Get("Origin"), site: r.Header.Get("Sec-Fetch-Site"), status: resp.StatusCode})
				p.mu.Unlock()
			}
			return nil
		},
	}
	rp.ServeHTTP(w, r)
}

func (p *recorder) daemonRequests() []seenRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]seenRequest(nil), p.seen...)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// attackPage tries to submit body to the daemon at daemonURL in every way
// a cross-origin page can, and embeds the rebound page.
func attackPage(daemonURL, rebindOrigin, body string) string {
	js, _ := json.Marshal(body)
	field := strings.TrimSuffix(body, "}") + `,"x":"` // text/plain forms send name=value
	return `<!doctype html><html><body><iframe name="sink1"></iframe><iframe name="sink2"></iframe><iframe id="nav"></iframe>
<form id="f1" method="POST" enctype="text/plain" action="` + daemonURL + `/queue" target="sink1"><input type="hidden" name='` + html.EscapeString(field) + `' value='"}'></form>
<form id="f2" method="POST" action="` + daemonURL + `/queue" target="sink2"><input type="hidden" name="cmd" value="x"></form>
<script>
const D = ` + "`" + daemonURL + "`" + `, body = ` + string(js) + `;
const pending = new Set(["fetch no-cors", "fetch cors text/plain", "fetch cors json", "form text/plain", "form urlencoded", "img", "frame", "rebind post", "rebind get"]);
function report(name, what) { fetch("/report?name=" + encodeURIComponent(name) + "&what=" + encodeURIComponent(what)); }
function log(name, what) {
  if (!pending.has(name)) return;
  pending.delete(name);
  report(name, what);
}
async function attempt(name, f) { try { log(name, await f()); } catch (e) { log(name, String(e)); } }
window.addEventListener("message", e => { if (e.data && e.data.name) log(e.data.name, e.data.what); });
(async () => {
  await attempt("fetch no-cors", async () => { const r = await fetch(D + "/queue", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body}); return "type " + r.type + " status " + r.status; });
  await attempt("fetch cors text/plain", async () => { const r = await fetch(D + "/queue", {method: "POST", headers: {"Content-Type": "text/plain"}, body}); return r.status + " " + await r.text(); });
  await attempt("fetch cors json", async () => { const r = await fetch(D + "/queue", {method: "POST", headers: {"Content-Type": "application/json"}, body}); return r.status + " " + await r.text(); });
  await attempt("img", () => new Promise(res => { const i = new Image(); i.onload = () => res("loaded"); i.onerror = () => res("error event"); i.src = D + "/status"; }));
  await attempt("frame", () => new Promise(res => { const f = document.getElementById("nav"); f.onload = () => res("navigated (content unreadable)"); f.src = D + "/status"; }));
  await attempt("form text/plain", () => new Promise(res => { document.getElementsByName("sink1")[0].onload = () => res("submitted (answer unreadable)"); document.getElementById("f1").submit(); }));
  await attempt("form urlencoded", () => new Promise(res => { document.getElementsByName("sink2")[0].onload = () => res("submitted (answer unreadable)"); document.getElementById("f2").submit(); }));
  const rb = document.createElement("iframe");
  rb.src = "` + rebindOrigin + `/rebind";
  document.body.appendChild(rb);
})();
</script></body></html>`
}

// rebindPage runs on the rebound origin: to the browser the daemon is its
// own server, so it needs no CORS and can read the answers.
func rebindPage(body string) string {
	js, _ := json.Marshal(body)
	return `<!doctype html><html><body><script>
const body = ` + string(js) + `;
function tell(name, what) { parent.postMessage({name, what}, "*"); }
(async () => {
  try { const r = await fetch("/queue", {method: "POST", headers: {"Content-Type": "application/json"}, body}); tell("rebind post", r.status + " " + await r.text()); } catch (e) { tell("rebind post", String(e)); }
  try { const r = await fetch("/status"); tell("rebind get", r.status + " " + await r.text()); } catch (e) { tell("rebind get", String(e)); }
})();
</script></body></html>`
}
