// Package stress beats on the real queued binary: 900 gated jobs from 64
// concurrent clients on one card and on two, kill -9 at random points of a
// submission storm, a full disk under the store, and one user flooding a
// system-mode queued (connections, submissions, the largest records) while
// another user's jobs keep running and their requests keep answering. The tests sit behind
// the stress build tag and run through `make stress`
// (go test -tags stress -count=1 -v ./test/stress/); they print their
// figures with t.Logf. The helpers that build and run the daemon are in
// package queuedproc, shared with test/security and test/bench.
package stress
