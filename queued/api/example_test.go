package api_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/config"
	"github.com/ttkit/ttkit/queued/defaults"
)

// Submitting a job and streaming its output, as `tt-device-queue run`
// does: find the state directory, read the token, queue, follow, and wait
// for the result.
func Example() {
	dir, err := config.StateDir(os.LookupEnv)
	if err != nil {
		fmt.Println(err)
		return
	}
	token, err := api.ReadToken(dir)
	if err != nil {
		fmt.Println(err) // queued is not running with this state directory
		return
	}
	c := api.NewClient(defaults.URL, token)
	defer c.Close()
	ctx := context.Background()
	job, err := c.Queue(ctx, api.QueueRequest{Cmd: "python3 my_device0_script.py", Cwd: "/home/me/blackhole-py", DeviceID: "0"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Fprintf(os.Stderr, "queued %s at position %d (about %.0fs)\n", job.JobID, job.Position, job.EstimatedWaitSec)
	if _, err := c.Follow(ctx, job.JobID, 0, os.Stdout); err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.WaitResult(ctx, job.JobID)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("exit code", *res.ExitCode)
}

// Choosing the daemon as tt-device-queue does when nothing names one: the
// user's own when it answers on the socket in its state directory, else
// the host's shared (system-mode) queued. Neither needs a token.
func ExampleProbeUnix() {
	dir, err := config.StateDir(os.LookupEnv)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	sock := filepath.Join(dir, api.SocketFile)
	if api.ProbeUnix(ctx, sock) != nil {
		sock = api.SystemSocket
	}
	c := api.NewUnixClient(sock)
	defer c.Close()
	st, err := c.Status(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	if st.Caller != nil {
		fmt.Printf("queued (%s mode) knows you as uid %d\n", st.Mode, st.Caller.UID)
	}
}
