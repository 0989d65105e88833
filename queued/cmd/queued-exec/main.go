// Command queued-exec is queued's exec helper (package execjob): queued
// starts every job, reset command and health check through it, so it
// holds the process before anything a user chose can block its start.
// It is not a command for people: run by hand it refuses, for want of
// the descriptors queued passes it.
package main

import (
	"os"

	"github.com/ttkit/ttkit/queued/execjob"
)

func main() { os.Exit(execjob.Main()) }
