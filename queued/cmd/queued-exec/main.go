// Command queued-exec is queued's exec helper (package execjob): queued
// starts every job, reset command and health check through it, so it
// holds the process before anything a user chose can block its start.
// It is not a command for people: run by hand it refuses, for want of
// the descriptors queued passes it. Built with cgo, it takes its steps in
// C before the Go runtime starts (start.c, start_cgo.go), and main runs
// only to refuse; without cgo, main takes them (package execjob).
//
// It lives a millisecond on one thread and then becomes another program,
// so the runtime's reading of the cgroup's CPU limit at start-up (to size
// GOMAXPROCS) and its later re-reading are cost with no use: a fifth of
// its start on our machines.
//
//go:debug containermaxprocs=0
//go:debug updatemaxprocs=0
package main

import (
	"os"

	"github.com/ttkit/ttkit/queued/execjob"
)

func main() { os.Exit(execjob.Main()) }
