// Package porttest hands tests loopback TCP ports for the servers they
// start (collectors, Prometheus, slurmctld), never the same port twice in
// one test binary.
//
// A port found free by listening on port 0 is free again once that
// listener closes, so two calls in a row can return the same one: CI saw
// an otelcol-tt given one port for its metrics and its health endpoint,
// and the second listener failed to bind.
package porttest

import (
	"net"
	"sync"
	"testing"
)

var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// Free returns a loopback port that no listener held a moment ago and
// that no earlier call in this process returned.
func Free(tb testing.TB) int {
	tb.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("finding a free loopback port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port
		}
	}
	tb.Fatal("finding a free loopback port: 100 tries gave only ports handed out already")
	return 0
}
