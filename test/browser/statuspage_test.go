//go:build chromium

package browser

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// screenshotEnv names a file to write the page's screenshot to, besides
// the test's own temp dir; `make screenshot` sets it to
// docs/img/status-page.png.
const screenshotEnv = "STATUS_PAGE_SCREENSHOT"

// browserTab starts a headless Chromium with a fresh profile and returns
// a tab's context, and a recorder of what the tab logs and requests.
func browserTab(t *testing.T, width, height int) (context.Context, *tabRecord) {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(findChromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, height),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
		cancelAlloc()
	})
	rec := &tabRecord{}
	if err := chromedp.Do(ctx); err != nil { // starts the browser and attaches the tab
		t.Fatalf("starting chromium: %v", err)
	}
	if err := chromedp.Listen(ctx, rec.add); err != nil {
		t.Fatal(err)
	}
	return ctx, rec
}

// tabRecord keeps the console errors and the requests of a tab.
type tabRecord struct {
	mu       sync.Mutex
	errors   []string
	requests []request
}

type request struct {
	url, fragment, auth string
	kind                network.ResourceType
}

// add runs in the tab's event loop: it must return fast and send nothing.
func (r *tabRecord) add(ev any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
			var parts []string
			for _, a := range ev.Args {
				parts = append(parts, string(a.Value))
			}
			r.errors = append(r.errors, "console."+string(ev.Type)+": "+strings.Join(parts, " "))
		}
	case *runtime.EventExceptionThrown:
		r.errors = append(r.errors, "exception: "+ev.ExceptionDetails.Text)
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError || ev.Entry.Level == log.EntryLevelWarning {
			r.errors = append(r.errors, "log "+string(ev.Entry.Source)+": "+ev.Entry.Text+" "+ev.Entry.URL)
		}
	case *network.EventRequestWillBeSent:
		auth, _ := ev.Request.Headers["Authorization"].(string)
		r.requests = append(r.requests, request{url: ev.Request.URL, fragment: ev.Request.URLFragment, auth: auth, kind: ev.Type})
	}
}

func (r *tabRecord) snapshot() ([]string, []request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errors...), append([]request(nil), r.requests...)
}

// pageFiles are the page's own files, which carry no data and need no
// token (a browser cannot send one with them).
var pageFiles = map[string]bool{"/": true, "/app.js": true, "/style.css": true, "/favicon.svg": true}

// TestChromiumStatusPage loads the live status page from the URL that
// `tt-device-queue web` prints and checks that it renders both cards
// with the running jobs, their output, the queue, each job's owner, the
// last reset and the holder outside the queue; that a job submitted after
// load shows within a second; that the console logs no error; that every
// request the script makes carries the token as a bearer token and no
// request carries it in its URL; and that in a narrow window nothing
// overflows sideways.
func TestChromiumStatusPage(t *testing.T) {
	sc := startScene(t)
	ctx, rec := browserTab(t, 960, 900)
	page := sc.d.URL + "/#token=" + url.QueryEscape(sc.d.Token)
	if err := chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#card-0 .tail")), chromedp.WaitVisible(chromedp.CSS("#card-1 .tail"))); err != nil {
		t.Fatalf("the page did not render both cards: %v", err)
	}
	waitText := func(sel, want string) {
		t.Helper()
		js := `((document.querySelector(` + quote(sel) + `) || {}).textContent || "")`
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js+`.includes(`+quote(want)+`)`, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
			got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](js))
			t.Fatalf("%s never showed %q: %v; it shows %q", sel, want, err, got)
		}
	}
	waitText("#card-0", "train_model 600")
	waitText("#tail-"+sc.train, "epoch 2/10")
	waitText("#card-0 ol.queue", "python3 eval.py")
	waitText("#card-0 ol.queue", "./bench.sh matmul")
	// Whose each job is: the owner, else (a daemon that records no
	// owner) the client id it was submitted under.
	waitText("#card-0 .kv", "owner")
	waitText("#card-0 .kv", "alice")
	waitText("#card-0 ol.queue .owner", "alice")
	waitText("#card-1", "eval_model 600")
	waitText("#tail-"+sc.eval, "evaluating llama-3b on card 1")
	waitText("#card-1", "ok at")                    // the last reset
	waitText("#card-1 .foreign", "rogue_benchmark") // held outside the queue
	waitText("#store", "store ok")

	// A job submitted now appears within a second: the page's long-poll
	// answers at the change, no polling interval stands in between.
	submitted := time.Now()
	id := sc.queue(t, "0", "echo submitted after the page loaded")
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!!document.querySelector('li[data-job="`+id+`"]')`,
		chromedp.WithPollingTimeout(time.Second))); err != nil {
		t.Fatalf("the job submitted after load did not show within a second: %v", err)
	}
	t.Logf("a job submitted after load showed after %s", time.Since(submitted).Round(time.Millisecond))

	state, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[location.href, sessionStorage.getItem("queued-token") || ""]`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(state[0], "token") || state[1] != sc.d.Token {
		t.Errorf("the page should move the token from its address to sessionStorage: href %q, stored %t", state[0], state[1] == sc.d.Token)
	}

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	writeShot(t, "status-page.png", shot)

	// Narrow: a phone-sized window scrolls down only.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(360, 800)); err != nil {
		t.Fatal(err)
	}
	widths, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`))
	if err != nil {
		t.Fatal(err)
	}
	if widths[0] > widths[1] {
		t.Errorf("at 360px the page is %dpx wide: it overflows sideways", widths[0])
	}
	if narrow, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		writeShot(t, "status-page-narrow.png", narrow)
	}

	errs, reqs := rec.snapshot()
	for _, e := range errs {
		t.Errorf("the page logged an error: %s", e)
	}
	data := 0
	for _, r := range reqs {
		u, err := url.Parse(r.url)
		if err != nil {
			t.Errorf("request to %q: %v", r.url, err)
			continue
		}
		if strings.Contains(r.url, sc.d.Token) {
			t.Errorf("the token travelled in a URL: %s %s", r.kind, u.Path)
		}
		if u.Host != strings.TrimPrefix(sc.d.URL, "http://") {
			t.Errorf("a request left queued: %s", r.url)
		}
		if pageFiles[u.Path] && r.kind != network.ResourceTypeFetch {
			continue
		}
		data++
		if r.auth != "Bearer "+sc.d.Token {
			t.Errorf("%s request to %s without the bearer token (Authorization %q)", r.kind, u.Path, r.auth)
		}
	}
	if data < 3 {
		t.Errorf("only %d data requests were seen; the test would prove nothing: %+v", data, reqs)
	}
}

// TestChromiumStatusPageWithoutToken opens the page without a token: it
// says how to get one and asks queued for no data at all.
func TestChromiumStatusPageWithoutToken(t *testing.T) {
	sc := startScene(t)
	ctx, rec := browserTab(t, 800, 600)
	if err := chromedp.Do(ctx, chromedp.Navigate(sc.d.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#notice"))); err != nil {
		t.Fatal(err)
	}
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#notice")))
	if err != nil || !strings.Contains(text, "tt-device-queue web") {
		t.Fatalf("notice %q, %v", text, err)
	}
	errs, reqs := rec.snapshot()
	for _, e := range errs {
		t.Errorf("the page logged an error: %s", e)
	}
	for _, r := range reqs {
		u, _ := url.Parse(r.url)
		if !pageFiles[u.Path] || r.kind == network.ResourceTypeFetch {
			t.Errorf("without a token the page asked for %s (%s)", u.Path, r.kind)
		}
	}
}

func quote(s string) string { return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'" }

// writeShot keeps a screenshot in the test's temp dir, and where
// STATUS_PAGE_SCREENSHOT says for the first one.
func writeShot(t *testing.T, name string, png []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(t.TempDir(), name), png, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := os.Getenv(screenshotEnv); out != "" && name == "status-page.png" {
		if err := os.WriteFile(out, png, 0o644); err != nil {
			t.Fatalf("writing the screenshot: %v", err)
		}
		t.Logf("wrote %s", out)
	}
}
