package api

import (
	"context"
	"net/http"
)

// PagePaths are the status page's static files (GET / and what it loads):
// they hold code and no data, so the daemon serves them without a token,
// and so does the CLI's page proxy (tt-device-queue web in system mode).
// Every other path needs the token.
var PagePaths = []string{"/", "/app.js", "/style.css", "/favicon.svg"}

// PageCodePath is POST /page/code: a client that holds the token (over
// TCP) or is the caller on the socket asks for a one-time code to open
// the status page with (tt-device-queue web --open), so the browser's
// command line, which every user of the host can read, carries no token.
const PageCodePath = "/page/code"

// PageSessionPath is POST /page/session: the status page exchanges the
// one-time code in its address for a token that reads only the page's
// data. It needs no token; the code is good once, for CodeLifetime.
const PageSessionPath = "/page/session"

// PageCode asks for a one-time code that opens the status page (POST
// /page/code): good once, for CodeLifetime, on a connection of the
// daemon's own user.
func (c *Client) PageCode(ctx context.Context) (PageCodeResponse, error) {
	var out PageCodeResponse
	_, err := c.do(ctx, http.MethodPost, PageCodePath, struct{}{}, &out)
	return out, err
}
