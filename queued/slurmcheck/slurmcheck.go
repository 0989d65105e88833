// Package slurmcheck asks Slurm whether a job is gone, for queued's holds:
// a hold taken for a Slurm job by its Prolog is released by its Epilog,
// and a node that rebooted or a slurmd that crashed never runs that
// Epilog, so queued asks squeue now and then and ends the holds of jobs
// Slurm no longer runs.
package slurmcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// Find returns the squeue to ask: setting (TT_DEVICE_SLURM_CHECK) when it
// names one, none for "off", else squeue when it is on PATH (none when it
// is not).
func Find(setting string) (string, error) {
	switch setting {
	case "off":
		return "", nil
	case "":
		p, err := exec.LookPath("squeue")
		if err != nil {
			return "", nil // no Slurm on this host: nothing to ask
		}
		return p, nil
	}
	p, err := exec.LookPath(setting)
	if err != nil {
		return "", fmt.Errorf("TT_DEVICE_SLURM_CHECK=%s: %w", setting, err)
	}
	return p, nil
}

// gone are the job states in which a Slurm job no longer holds this
// node's cards: it ended, or it was requeued (PENDING again, REQUEUED,
// REQUEUE_HOLD, REQUEUE_FED) or revoked from this cluster; a requeued job
// that starts again runs its Prolog again, which takes a hold of its own.
// A suspended job keeps its cards, and a completing one is released by
// its Epilog.
var gone = map[string]bool{
	"COMPLETED": true, "CANCELLED": true, "FAILED": true, "TIMEOUT": true, "NODE_FAIL": true,
	"PREEMPTED": true, "OUT_OF_MEMORY": true, "BOOT_FAIL": true, "DEADLINE": true, "SPECIAL_EXIT": true,
	"PENDING": true, "REQUEUED": true, "REQUEUE_HOLD": true, "REQUEUE_FED": true, "REVOKED": true,
}

// passEnv are the variables of queued's environment squeue is given: a
// host whose slurm.conf is not where Slurm was built to look names it
// with SLURM_CONF, and squeue finds no slurmctld without it.
var passEnv = []string{"SLURM_CONF", "SLURM_CLUSTERS"}

// Gone returns a function that asks squeue at path about a Slurm job:
// gone when squeue knows no such job (it forgets a job some minutes after
// it ends) or reports it in a gone state (every component of it, for a
// job squeue prints a line per component of). An answer squeue cannot
// give (it cannot reach slurmctld) is an error, and the hold stays.
func Gone(path string) func(ctx context.Context, id string) (bool, string, error) {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C"}
	for _, k := range passEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return func(ctx context.Context, id string) (bool, string, error) {
		if id == "" || strings.ContainsAny(id, " \t\n") {
			return false, "", fmt.Errorf("slurm job id %q", id)
		}
		cmd := exec.CommandContext(ctx, path, "-h", "-j", id, "-o", "%T")
		cmd.Env = env
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		err := cmd.Run()
		states := strings.Fields(out.String())
		msg := strings.TrimSpace(stderr.String())
		var exit *exec.ExitError
		switch {
		case err == nil && len(states) == 0:
			return true, "squeue knows no such job", nil
		case err == nil:
			for _, st := range states {
				if !gone[st] {
					return false, strings.ToLower(st), nil
				}
			}
			return true, "it is " + strings.ToLower(strings.Join(slices.Compact(states), ", ")), nil
		case errors.As(err, &exit) && strings.Contains(msg, "Invalid job id"):
			return true, "squeue knows no such job", nil
		}
		return false, "", fmt.Errorf("asking %s about Slurm job %s: %w: %s", path, id, err, msg)
	}
}
