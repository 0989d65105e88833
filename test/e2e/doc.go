// Package e2e holds the end-to-end tests that run the built otelcol-tt
// distribution against a real Prometheus server. They need bin/otelcol-tt
// and a prometheus binary, so they sit behind the e2e build tag and run
// through `make e2e`, which builds the former and expects the latter
// (Debian's prometheus package; .ci/run installs it).
package e2e
