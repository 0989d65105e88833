// Package browser drives queued's live status page in a real headless
// Chromium through the DevTools protocol (chromedp), against the real
// queued binary: both cards render, a job submitted after the page
// loaded shows within a second, the console stays free of errors, every
// request the page's script makes carries the token and none carries it
// in its URL, and the page reads well in a narrow window. Its tests are
// behind the chromium build tag (`make security-browser`, which CI runs);
// `make screenshot` also writes docs/img/status-page.png.
package browser
