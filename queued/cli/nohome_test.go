package cli_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttkit/ttkit/queued/api"
)

// A Slurm Prolog runs with no HOME. Given the socket's address, the CLI
// needs no state directory and must not ask for one; a TCP address still
// does (its token lives there), and says so.
func TestNoHome_SocketAddressIsEnough(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	stdin := ""
	run := func(env []string, args ...string) result {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "tt-device-queue"), args...)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
		cmd.Dir = "/"
		cmd.Stdin = strings.NewReader(stdin)
		return runCmd(t, cmd)
	}
	sock := filepath.Join(d.state, api.SocketFile)
	run([]string{"TT_DEVICE_URL=unix://" + sock}, "status").want(t, 0, []string{"healthy"}, nil)
	r := run(nil, "--host", "unix://"+sock, "queue", "--device", "1", "--", "echo no home")
	r.want(t, 0, nil, nil)
	run([]string{"TT_DEVICE_URL=unix://" + sock}, "wait", r.stdout[:8]).want(t, 0, nil, nil)
	// A script from stdin is copied into the state directory: without one,
	// it is refused, naming why.
	stdin = "print(1)\n"
	run([]string{"TT_DEVICE_URL=unix://" + sock}, "queue-python", "--device", "0", "-").want(t, 2, nil, []string{"HOME is unset", "script's copy"})
	stdin = ""
	run([]string{"TT_DEVICE_URL=http://127.0.0.1:1"}, "status").want(t, 2, nil, []string{"HOME is unset"})
	run([]string{"TT_DEVICE_URL=unix://" + sock, "TT_DEVICE_LOG_DIR=relative/dir"}, "status").want(t, 2, nil, []string{"relative/dir"})
}
