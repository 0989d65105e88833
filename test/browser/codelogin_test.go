//go:build chromium

package browser

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestChromiumStatusPageOpensWithOneTimeCode opens the page as `web
// --open` does (issue 38, finding 2): on the address with a one-time
// code, never the token. The page exchanges the code for a page token,
// takes the code out of its address, sends the page token (not the
// daemon's) with every data request, still works after a reload, and a
// second tab on the same code is refused with a notice that says what to
// do. A job whose command carries a right-to-left override shows it as
// an escape (finding 8), not reordered.
func TestChromiumStatusPageOpensWithOneTimeCode(t *testing.T) {
	sc := startScene(t)
	bidi := sc.queue(t, "0", "echo \u202eexe.cod\u202c done")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	code, err := sc.c.PageCode(ctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	tab, rec := browserTab(t, 960, 900)
	page := sc.d.URL + "/#code=" + url.QueryEscape(code.Code)
	if err := chromedp.Do(tab, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#card-0 .tail"))); err != nil {
		t.Fatalf("the page did not render with the code: %v", err)
	}
	state, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`[location.href, sessionStorage.getItem("queued-token") || ""]`))
	if err != nil {
		t.Fatal(err)
	}
	pageToken := state[1]
	if strings.Contains(state[0], "code") || pageToken == "" || pageToken == sc.d.Token {
		t.Errorf("the page should trade the code for a token of its own: href %q, a page token: %t", state[0], pageToken != "" && pageToken != sc.d.Token)
	}
	js := `(document.querySelector('li[data-job="` + bidi + `"]')?.textContent || "")`
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](js+`.includes("\\u202eexe.cod\\u202c")`, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		got, _ := chromedp.Run(tab, chromedp.Evaluate[string](js))
		t.Errorf("the queued job's right-to-left override is not shown as an escape: %q", got)
	}
	if err := chromedp.Do(tab, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#card-0 .tail"))); err != nil {
		t.Fatalf("the page did not render after a reload: %v", err)
	}
	errs, reqs := rec.snapshot()
	for _, e := range errs {
		t.Errorf("the page logged an error: %s", e)
	}
	data := 0
	for _, r := range reqs {
		u, _ := url.Parse(r.url)
		if strings.Contains(r.url, code.Code) || strings.Contains(r.url, pageToken) {
			t.Errorf("a secret travelled in a URL: %s %s", r.kind, u.Path)
		}
		if pageFiles[u.Path] || u.Path == "/page/session" {
			continue
		}
		data++
		if r.auth != "Bearer "+pageToken {
			t.Errorf("%s request to %s without the page token (Authorization %q)", r.kind, u.Path, r.auth)
		}
	}
	if data < 3 {
		t.Errorf("only %d data requests were seen; the test would prove nothing", data)
	}

	// The same code in a fresh browser (another profile): refused.
	again, _ := browserTab(t, 800, 600)
	if err := chromedp.Do(again, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#notice"))); err != nil {
		t.Fatal(err)
	}
	text, err := chromedp.Run(again, chromedp.Text(chromedp.CSS("#notice")))
	if err != nil || !strings.Contains(text, "one-time code was refused") || !strings.Contains(text, "web --open") {
		t.Errorf("a used code: notice %q, %v", text, err)
	}
}
