package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ttkit/ttkit/test/stress/queuedproc"
)

// floorDrain spawns the jobs one after another with no queue.
func floorDrain(c config) (time.Duration, error) {
	t0 := time.Now()
	for range c.jobs {
		if err := exec.Command("bash", "-c", "/bin/true").Run(); err != nil {
			return 0, err
		}
	}
	return time.Since(t0), nil
}

// spawnAll runs one command per job from c.clients goroutines, as
// concurrent submitters would.
func spawnAll(c config, env []string, name string, args ...string) error {
	next := make(chan int)
	errs := make(chan error, c.clients)
	var wg sync.WaitGroup
	for range c.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				cmd := exec.Command(name, args...)
				cmd.Env = env
				if out, err := cmd.CombinedOutput(); err != nil {
					errs <- fmt.Errorf("%s: %w: %s", name, err, out)
					return
				}
			}
		}()
	}
	var err error
feed:
	for i := 0; i < c.jobs; i++ {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil && len(errs) > 0 {
		err = <-errs
	}
	return err
}

// findTsp returns task-spooler's binary: tsp on Debian, where ts is
// moreutils' timestamper; ts elsewhere.
func findTsp() string {
	if p, err := exec.LookPath("tsp"); err == nil {
		return p
	}
	if p, err := exec.LookPath("ts"); err == nil {
		out, _ := exec.Command(p, "-V").CombinedOutput()
		if bytes.Contains(out, []byte("Task Spooler")) {
			return p
		}
	}
	return ""
}

// tspDrain runs the shape through task-spooler with one slot and a
// private socket. note is set when tsp is not installed.
func tspDrain(c config, run int) (time.Duration, string, error) {
	tsp := findTsp()
	if tsp == "" {
		return 0, "not installed: Debian package task-spooler", nil
	}
	dir := filepath.Join(c.work, "tsp-"+strconv.Itoa(run))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, "", err
	}
	env := append(os.Environ(), "TS_SOCKET="+filepath.Join(dir, "socket"), "TMPDIR="+dir, "TS_SLOTS=1", "TS_MAXFINISHED=100000")
	tspRun := func(args ...string) ([]byte, error) {
		cmd := exec.Command(tsp, args...)
		cmd.Env = env
		return cmd.CombinedOutput()
	}
	defer tspRun("-K") // stop this run's server
	gate, err := queuedproc.NewGate(filepath.Join(dir, "gate"))
	if err != nil {
		return 0, "", err
	}
	if out, err := tspRun("bash", "-c", gate.Cmd); err != nil {
		return 0, "", fmt.Errorf("queueing the gate: %w: %s", err, out)
	}
	if err := spawnAll(c, env, tsp, "bash", "-c", "/bin/true"); err != nil {
		return 0, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	if err := gate.Open(ctx); err != nil {
		return 0, "", err
	}
	if out, err := tspRun("-w"); err != nil { // waits for the last job queued
		return 0, "", fmt.Errorf("tsp -w: %w: %s", err, out)
	}
	d := time.Since(t0)
	out, err := tspRun("-l")
	if err != nil {
		return 0, "", fmt.Errorf("tsp -l: %w", err)
	}
	if ok := countFields(out, "finished", "0"); ok != c.jobs+1 {
		return 0, "", fmt.Errorf("tsp: %d jobs finished with exit 0, want %d", ok, c.jobs+1)
	}
	return d, "", nil
}

// countFields counts tsp -l lines whose state and exit level match.
func countFields(list []byte, state, level string) int {
	n := 0
	for _, line := range strings.Split(string(list), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[1] == state && f[3] == level {
			n++
		}
	}
	return n
}

// nqDrain runs the shape through nq in a private NQDIR. note is set when
// nq is not installed.
func nqDrain(c config, run int) (time.Duration, string, error) {
	nq, err := exec.LookPath("nq")
	if err != nil {
		return 0, "not installed: Debian package nq", nil
	}
	dir := filepath.Join(c.work, "nq-"+strconv.Itoa(run))
	if err := os.MkdirAll(filepath.Join(dir, "jobs"), 0o755); err != nil {
		return 0, "", err
	}
	env := append(os.Environ(), "NQDIR="+filepath.Join(dir, "jobs"))
	gate, err := queuedproc.NewGate(filepath.Join(dir, "gate"))
	if err != nil {
		return 0, "", err
	}
	cmd := exec.Command(nq, "bash", "-c", gate.Cmd)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, "", fmt.Errorf("queueing the gate: %w: %s", err, out)
	}
	if err := spawnAll(c, env, nq, "bash", "-c", "/bin/true"); err != nil {
		return 0, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	if err := gate.Open(ctx); err != nil {
		return 0, "", err
	}
	wait := exec.CommandContext(ctx, nq, "-w") // waits for every job in NQDIR
	wait.Env = env
	if out, err := wait.CombinedOutput(); err != nil {
		return 0, "", fmt.Errorf("nq -w: %w: %s", err, out)
	}
	d := time.Since(t0)
	// nq -w returns once each job's lock is free; on a busy machine a
	// job's last line ("[exited with status 0.]") can land a moment after
	// that, so the check waits for it (the drain's time is already taken).
	var ok, n int
	for deadline := time.Now().Add(30 * time.Second); ; {
		if ok, n, err = nqExitedZero(dir); err != nil || ok == c.jobs+1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return 0, "", err
	}
	if ok != c.jobs+1 {
		return 0, "", fmt.Errorf("nq: %d of %d job files show exit 0, want %d", ok, n, c.jobs+1)
	}
	return d, "", nil
}

// nqExitedZero counts the job files in dir's NQDIR that say their job
// exited 0, and the job files there.
func nqExitedZero(dir string) (ok, files int, err error) {
	names, err := filepath.Glob(filepath.Join(dir, "jobs", ",*"))
	if err != nil {
		return 0, 0, err
	}
	for _, f := range names {
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte("[exited with status 0.]")) {
			ok++
		}
	}
	return ok, len(names), nil
}
