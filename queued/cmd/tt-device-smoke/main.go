// Command tt-device-smoke is the hardware smoke test (make smoke): on one
// idle card it resets the card through the installed queued, runs a job
// that holds the card and checks that otelcol-tt names the job's process.
// See docs/operations.md and package queued/smoke.
//
// Exit status: 0 when every step passed, 1 when one failed, 2 for usage
// errors or when queued cannot be reached, 3 when the card is busy.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/config"
	"github.com/ttkit/ttkit/queued/smoke"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("tt-device-smoke", flag.ContinueOnError)
	card := fs.Int("card", envInt("SMOKE_CARD", 0), "card to test; it must be idle (env SMOKE_CARD)")
	metrics := fs.String("metrics", envStr("SMOKE_METRICS_URL", "http://127.0.0.1:9464/metrics"), "otelcol-tt's Prometheus endpoint (env SMOKE_METRICS_URL)")
	devDir := fs.String("dev-dir", config.DefaultDevDir, "directory of the cards' device nodes")
	python := fs.String("python", "python3", "Python that runs the job holding the card")
	wait := fs.Duration("metrics-wait", time.Minute, "how long otelcol-tt has to report the job's process")
	resetTimeout := fs.Duration("reset-timeout", 10*time.Minute, "how long the reset and health check may take")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *card < 0 {
		fmt.Fprintf(os.Stderr, "tt-device-smoke: -card %d: want a card number, 0 or more\n", *card)
		return 2
	}
	dir, err := config.StateDir(os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tt-device-smoke:", err)
		return 2
	}
	sock := filepath.Join(dir, api.SocketFile)
	client := api.NewUnixClient(sock)
	defer client.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := smoke.Run(ctx, smoke.Options{
		Card: *card, Queued: client, QueuedAt: "unix://" + sock, MetricsURL: *metrics,
		DevDir: *devDir, Python: *python, KMDVersionFile: "/sys/module/tenstorrent/version",
		ResetTimeout: *resetTimeout, MetricsWait: *wait, Progress: os.Stderr,
	})
	switch {
	case errors.Is(err, smoke.ErrBusy):
		fmt.Fprintln(os.Stderr, "tt-device-smoke:", err)
		return 3
	case err != nil:
		fmt.Fprintln(os.Stderr, "tt-device-smoke:", err)
		return 2
	}
	r.WriteText(os.Stdout)
	if !r.Passed {
		return 1
	}
	return 0
}

func envStr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
		fmt.Fprintf(os.Stderr, "tt-device-smoke: %s=%q is not a card number\n", name, v)
		os.Exit(2)
	}
	return def
}
