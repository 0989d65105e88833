package api

// PagePaths are the status page's static files (GET / and what it loads):
// they hold code and no data, so the daemon serves them without a token,
// and so does the CLI's page proxy (tt-device-queue web in system mode).
// Every other path needs the token.
var PagePaths = []string{"/", "/app.js", "/style.css", "/favicon.svg"}
