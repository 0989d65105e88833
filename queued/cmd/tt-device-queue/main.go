// Command tt-device-queue is the command line of queued: submit jobs to a
// card's FIFO queue, follow them, and read their results. See package cli.
package main

import (
	"os"

	"github.com/ttkit/ttkit/queued/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
}
