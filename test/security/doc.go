// Package security attacks the real queued binary over raw HTTP: a table
// of malformed and hostile requests (types, sizes, encodings, ids,
// headers, methods, paths), each of which must be refused with the right
// status and a JSON error naming the problem, and none of which may
// enqueue anything. It runs in `make test`. Behind the chromium build tag
// (`make security-browser`), a real headless Chromium loads a page from
// another loopback port that tries to submit a job by fetch, by form and
// by a DNS-rebinding host name.
package security
