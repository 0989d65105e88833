//go:build chromium

package browser

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/test/stress/queuedproc"
)

// TestChromiumStatusPageShowsTheRung: while a reset climbs the recovery
// ladder, the card on the page names the rung running and its place on
// the ladder, as `status` does.
func TestChromiumStatusPageShowsTheRung(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	d, err := queuedproc.Start(queuedproc.Options{Bin: queuedBin, StateDir: filepath.Join(dir, "state"), LogPath: filepath.Join(dir, "queued.log"),
		Env: []string{"PATH=" + os.Getenv("PATH"), "TT_DEVICE_DRIVER_PATH=" + filepath.Join(dir, "driver"),
			"TT_DEVICE_RESET_CMD=while [ ! -e " + open + " ]; do sleep 0.05; done; echo reset {device}",
			"TT_DEVICE_DEEP_RESET_CMD=true", "TT_DEVICE_HEALTH_CHECK_CMD=true"}})
	if err != nil {
		t.Fatal(err)
	}
	c := d.Client()
	t.Cleanup(func() {
		os.WriteFile(open, nil, 0o600)
		c.Close()
		if err := d.Stop(20 * time.Second); err != nil {
			t.Errorf("stopping queued: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.Reset(ctx, api.ResetRequest{DeviceID: "1"}); err != nil {
		t.Fatal(err)
	}
	tab, _ := browserTab(t, 960, 900)
	page := d.URL + "/#token=" + url.QueryEscape(d.Token)
	if err := chromedp.Do(tab, chromedp.Navigate(page)); err != nil {
		t.Fatal(err)
	}
	js := `((document.querySelector("#card-1 .rung") || {}).textContent || "")`
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](js+`.includes("Recovery ladder: reset (1/2)")`, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		got, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector("#card-1").textContent`))
		t.Fatalf("card 1 never showed its rung: %v; it shows %q", err, got)
	}
}
