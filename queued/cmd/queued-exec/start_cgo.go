//go:build cgo

package main

// With cgo, queued-exec takes its steps in C (start.c), in a constructor
// that runs before the Go runtime starts: a job's start then costs the
// helper's few system calls, not the runtime's start beside them (about
// 1.5 ms of CPU and 33 page faults to its first step against 5.6–6.9 ms
// and some 170 for the Go helper on our machines; issue 41). The Go
// steps (package execjob) stay the reference and the fallback: without
// cgo, or run by hand, main runs them. It is linked statically, so no
// dynamic loader runs before the constructor: nothing of the helper's
// start is read from a library path, and the start is shorter still.

// #cgo CFLAGS: -O2 -Wall -Wextra -Werror=format-security
// #cgo LDFLAGS: -static
import "C"
